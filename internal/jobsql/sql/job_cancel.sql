-- job_cancel: cancel job $1. A blocked, scheduled or available job becomes cancelled
-- at once. A running job only gets cancel_requested_at, its fence and lease
-- untouched, and its holder is told on the control channel $2 at commit:
-- the result it writes next, or the rescuer, ends the job cancelled.
-- A final job is not changed; it is read back in the same statement under
-- FOR SHARE, which waits for a result in flight and then reads the version
-- it committed. Not FOR KEY SHARE, as JobRetry and JobDelete use: that
-- lock does not conflict with a result's (no-key) update, so it would
-- return the version before it (running), which this statement's UPDATE
-- has just waited for and seen end. Returns the columns of job_get.sql.
WITH cancelled AS (
    UPDATE {{schema}}.jobs j
    SET state = CASE WHEN j.state = 'running' THEN j.state ELSE 'cancelled' END,
        finalized_at = CASE WHEN j.state = 'running' THEN NULL ELSE now() END,
        cancel_requested_at = CASE WHEN j.state = 'running' THEN coalesce(j.cancel_requested_at, now()) END
    WHERE j.id = $1 AND j.state IN ('blocked', 'scheduled', 'available', 'running')
    RETURNING j.*
), told AS (
    SELECT pg_notify($2, json_build_object('op', 'cancel', 'id', c.id, 'fence', c.fence)::text)
    FROM cancelled c
    WHERE c.state = 'running'
), settled AS (
    -- A blocked, scheduled or available job cancelled now that some job
    -- depends on settles its dependents by their policy (workflow_settle).
    SELECT {{schema}}.workflow_settle(array_agg(c.id), array_agg('cancelled'::text))
    FROM cancelled c WHERE c.state = 'cancelled' AND c.has_children HAVING count(*) > 0
), unchanged AS (
    SELECT id, queue, kind, args, priority, state, attempt, max_attempts,
           run_at, fence, lease_until, worker_id, errors, tags, meta,
           created_at, attempted_at, finalized_at, singleton_key, partition_key, sequence_key,
           cancel_requested_at, output, progress
    FROM {{schema}}.jobs
    WHERE id = $1 AND NOT EXISTS (SELECT 1 FROM cancelled)
    FOR SHARE
)
SELECT c.id, c.queue, c.kind, c.args, c.priority, c.state, c.attempt, c.max_attempts,
       c.run_at, c.fence, c.lease_until, c.worker_id, c.errors, c.tags, c.meta,
       c.created_at, c.attempted_at, c.finalized_at, c.singleton_key, c.partition_key, c.sequence_key,
       c.cancel_requested_at, c.output, c.progress
-- told and settled are joined so that they run: a SELECT in WITH is evaluated only when
-- the query refers to it.
FROM cancelled c CROSS JOIN (SELECT count(*) FROM told) AS n CROSS JOIN (SELECT count(*) FROM settled) AS s
UNION ALL
SELECT * FROM unchanged
