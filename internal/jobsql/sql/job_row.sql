-- job_row: job $1 with the columns insert.sql returns, for an insert that
-- cannot return its row itself (a job with dependencies).
SELECT id, queue, kind, args, priority, {{schema}}.job_state(state, gate_id, queue), attempt, max_attempts,
       run_at, fence, lease_until, worker_id, errors, tags, meta,
       created_at, attempted_at, finalized_at, singleton_key,
       partition_key, sequence_key
FROM {{schema}}.jobs
WHERE id = $1
