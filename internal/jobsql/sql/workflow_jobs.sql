-- workflow_jobs: the jobs of workflow $1, in id order, with the columns of
-- job_get.sql (read by the same scanner).
SELECT id, queue, kind, args, priority, {{schema}}.job_state(state, gate_id, queue), attempt, max_attempts,
       run_at, fence, lease_until, worker_id, errors, tags, meta,
       created_at, attempted_at, finalized_at, singleton_key, partition_key, sequence_key,
       cancel_requested_at, output, progress
FROM {{schema}}.jobs
WHERE workflow_id = $1
ORDER BY id
