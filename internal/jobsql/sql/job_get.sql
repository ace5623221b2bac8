-- job_get: every column of job $1 that JobRow holds, in the order
-- jobFullScanner reads them (job_get.go; job_list.sql returns the same),
-- the state as job_state shows it.
SELECT j.id, j.queue, j.kind, j.args, j.priority, {{schema}}.job_state(j.state, j.gate_id, j.queue), j.attempt, j.max_attempts,
       j.run_at, j.fence, j.lease_until, j.worker_id, j.errors, j.tags, j.meta,
       j.created_at, j.attempted_at, j.finalized_at, j.singleton_key, j.partition_key, j.sequence_key,
       j.cancel_requested_at, j.output, j.progress
FROM {{schema}}.jobs j
WHERE j.id = $1
