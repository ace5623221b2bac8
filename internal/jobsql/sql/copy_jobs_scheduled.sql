-- copy_jobs_scheduled: the binary COPY of EnqueueMany for jobs with a run_at;
-- they are written scheduled and the scheduler makes them available when
-- due, so no client clock is compared with the database's.
COPY {{schema}}.jobs (queue, kind, args, priority, max_attempts, tags, meta, singleton_key, partition_key, sequence_key, run_at, state) FROM STDIN (FORMAT binary)
