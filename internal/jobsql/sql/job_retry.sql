-- job_retry: run job $1 again now, unless it is running, and wake the
-- listeners of channel $2 for its queue at commit. A scheduled, completed,
-- discarded or cancelled job becomes available now; its attempt and errors
-- stay, and max_attempts grows to attempt + 1 when the attempts were used
-- up, so it gets one more try (a job that still waits for jobs it depends
-- on goes back to blocked instead; one behind a gate only while the gate
-- is closed: a gate opened or gone no longer holds it). The UPDATE's WHERE is rechecked on the row's
-- latest version after any lock wait, so a job claimed meanwhile is skipped:
-- a running job's fence and lease are never written. The first column says
-- whether the job was retried; when it was not, the row is read under FOR
-- KEY SHARE (which waits for a claim in flight but not for the holder's
-- heartbeats or results), so the caller learns its current state.
WITH retried AS (
    UPDATE {{schema}}.jobs
    SET state               = CASE WHEN pending_parents > 0 AND (gate_id IS NULL OR {{schema}}.gate_closed(gate_id, queue))
                                   THEN 'blocked' ELSE 'available' END,
        pending_parents     = CASE WHEN gate_id IS NOT NULL AND NOT {{schema}}.gate_closed(gate_id, queue)
                                   THEN 0 ELSE pending_parents END,
        deps_cancelled      = NULL,
        run_at              = now(),
        finalized_at        = NULL,
        cancel_requested_at = NULL,
        max_attempts        = greatest(max_attempts, attempt + 1)
    WHERE id = $1 AND state IN ('scheduled', 'completed', 'discarded', 'cancelled')
    RETURNING id, queue, kind, args, priority, state, attempt, max_attempts,
              run_at, fence, lease_until, worker_id, errors, tags, meta,
              created_at, attempted_at, finalized_at, singleton_key, partition_key, sequence_key,
              cancel_requested_at, output, progress, has_children
), resumed AS (
    -- The dependents the job's failure cancelled wait for it again
    -- (workflow_resume): retrying a failed parent resumes its workflow.
    SELECT {{schema}}.workflow_resume(array_agg(id)) FROM retried WHERE has_children HAVING count(*) > 0
), unchanged AS (
    SELECT id, queue, kind, args, priority, state, attempt, max_attempts,
           run_at, fence, lease_until, worker_id, errors, tags, meta,
           created_at, attempted_at, finalized_at, singleton_key, partition_key, sequence_key,
           cancel_requested_at, output, progress
    FROM {{schema}}.jobs
    WHERE id = $1 AND NOT EXISTS (SELECT 1 FROM retried)
    FOR KEY SHARE
)
SELECT true, r.id, r.queue, r.kind, r.args, r.priority, r.state, r.attempt, r.max_attempts,
       r.run_at, r.fence, r.lease_until, r.worker_id, r.errors, r.tags, r.meta,
       r.created_at, r.attempted_at, r.finalized_at, r.singleton_key, r.partition_key, r.sequence_key,
       r.cancel_requested_at, r.output, r.progress
FROM retried r CROSS JOIN LATERAL (SELECT pg_notify($2, r.queue)) n CROSS JOIN (SELECT count(*) FROM resumed) AS s
UNION ALL
SELECT false, c.* FROM unchanged c
