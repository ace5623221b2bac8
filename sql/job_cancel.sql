-- job_cancel: cancel job $1. A scheduled or available job becomes cancelled
-- at once. A running job only gets cancel_requested_at, its fence and lease
-- untouched, and its holder is told on the control channel $2 at commit:
-- the result it writes next, or the rescuer, ends the job cancelled.
-- Final jobs are not matched: the caller reads them back unchanged.
-- Returns the columns of job_get.sql.
WITH cancelled AS (
    UPDATE {{schema}}.jobs j
    SET state = CASE WHEN j.state = 'running' THEN j.state ELSE 'cancelled' END,
        finalized_at = CASE WHEN j.state = 'running' THEN NULL ELSE now() END,
        cancel_requested_at = CASE WHEN j.state = 'running' THEN coalesce(j.cancel_requested_at, now()) END
    WHERE j.id = $1 AND j.state IN ('scheduled', 'available', 'running')
    RETURNING j.*
), told AS (
    SELECT pg_notify($2, json_build_object('op', 'cancel', 'id', c.id, 'fence', c.fence)::text)
    FROM cancelled c
    WHERE c.state = 'running'
)
SELECT c.id, c.queue, c.kind, c.args, c.priority, c.state, c.attempt, c.max_attempts,
       c.run_at, c.fence, c.lease_until, c.worker_id, c.errors, c.tags, c.meta,
       c.created_at, c.attempted_at, c.finalized_at, c.singleton_key,
       c.cancel_requested_at, c.output, c.progress
-- told is joined so that it runs: a SELECT in WITH is evaluated only when
-- the query refers to it.
FROM cancelled c CROSS JOIN (SELECT count(*) FROM told) AS n
