-- job_delete: delete job $1 unless it is running. The DELETE's WHERE is
-- rechecked on the row's latest version after any lock wait, so a job
-- claimed meanwhile is kept. The first column says whether the job was
-- deleted; when it was not, the row is read under FOR KEY SHARE (which
-- waits for a claim in flight but not for the holder's heartbeats or
-- results), so the caller learns its current state.
WITH deleted AS (
    DELETE FROM {{schema}}.jobs
    WHERE id = $1 AND state <> 'running'
    RETURNING id, queue, kind, args, priority, state, attempt, max_attempts,
              run_at, fence, lease_until, worker_id, errors, tags, meta,
              created_at, attempted_at, finalized_at, singleton_key, partition_key, sequence_key,
              cancel_requested_at, output, progress, has_children, workflow_id
), forgotten AS (
    -- A job with dependency edges takes them with it; the jobs that
    -- waited for it no longer do (workflow_forget).
    SELECT {{schema}}.workflow_forget(array_agg(id)) FROM deleted
    WHERE has_children OR workflow_id IS NOT NULL HAVING count(*) > 0
), unchanged AS (
    SELECT id, queue, kind, args, priority, state, attempt, max_attempts,
           run_at, fence, lease_until, worker_id, errors, tags, meta,
           created_at, attempted_at, finalized_at, singleton_key, partition_key, sequence_key,
           cancel_requested_at, output, progress
    FROM {{schema}}.jobs
    WHERE id = $1 AND NOT EXISTS (SELECT 1 FROM deleted)
    FOR KEY SHARE
)
SELECT true, d.id, d.queue, d.kind, d.args, d.priority, d.state, d.attempt, d.max_attempts,
       d.run_at, d.fence, d.lease_until, d.worker_id, d.errors, d.tags, d.meta,
       d.created_at, d.attempted_at, d.finalized_at, d.singleton_key, d.partition_key, d.sequence_key,
       d.cancel_requested_at, d.output, d.progress
FROM deleted d CROSS JOIN (SELECT count(*) FROM forgotten) AS f
UNION ALL
SELECT false, c.* FROM unchanged c
