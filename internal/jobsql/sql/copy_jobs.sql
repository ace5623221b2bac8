-- copy_jobs: the binary COPY of EnqueueMany for jobs due now; the stream's
-- fields follow this column list (see internal/enqueue/copy.go).
COPY {{schema}}.jobs (queue, kind, args, priority, max_attempts, tags, meta, singleton_key, partition_key, sequence_key) FROM STDIN (FORMAT binary)
