-- job_cancel_final: read job $1 back when job_cancel.sql matched nothing:
-- it is final already (or absent). A statement of its own, so it sees the
-- state a concurrent transaction committed while job_cancel waited for the
-- row. Same columns as job_cancel.sql.
SELECT id, queue, kind, args, priority, state, attempt, max_attempts,
       run_at, fence, lease_until, worker_id, errors, tags, meta,
       created_at, attempted_at, finalized_at, singleton_key,
       cancel_requested_at, output, progress
FROM {{schema}}.jobs
WHERE id = $1
