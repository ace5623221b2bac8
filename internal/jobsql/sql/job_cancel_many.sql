-- job_cancel_many: job_cancel.sql for the jobs of ids $1, in one
-- statement, telling the holders of running ones on the control channel
-- $2 at commit. Returns each job's id and what happened: 'cancelled' (now),
-- 'requested' (running: its cancel was requested), or the current state of
-- a job left alone (final already), read under FOR SHARE as job_cancel.sql
-- does. Ids missing from the result have no job.
--
-- The rows are locked first, in id order, as completions lock theirs (the
-- completer sends its batches sorted): the UPDATE alone took them in the
-- order of its plan (a bitmap scan's: the table's), and a cancel of many
-- jobs beside completions of the same ones deadlocked with them.
WITH locked AS MATERIALIZED (
    SELECT j.id
    FROM {{schema}}.jobs j
    WHERE j.id = ANY ($1::bigint[]) AND j.state IN ('blocked', 'scheduled', 'available', 'running')
    ORDER BY j.id
    FOR UPDATE
), cancelled AS (
    UPDATE {{schema}}.jobs j
    SET state = CASE WHEN j.state = 'running' THEN j.state ELSE 'cancelled' END,
        finalized_at = CASE WHEN j.state = 'running' THEN NULL ELSE now() END,
        cancel_requested_at = CASE WHEN j.state = 'running' THEN coalesce(j.cancel_requested_at, now()) END
    WHERE j.id = ANY (ARRAY(SELECT id FROM locked)) AND j.state IN ('blocked', 'scheduled', 'available', 'running')
    RETURNING j.id, j.state, j.fence, j.has_children
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
    SELECT j.id, j.state
    FROM {{schema}}.jobs j
    WHERE j.id = ANY ($1::bigint[]) AND NOT EXISTS (SELECT 1 FROM cancelled c WHERE c.id = j.id)
    FOR SHARE
)
-- told and settled are joined so that they run: a SELECT in WITH is evaluated only when
-- the query refers to it.
SELECT c.id, CASE WHEN c.state = 'running' THEN 'requested' ELSE 'cancelled' END
FROM cancelled c CROSS JOIN (SELECT count(*) FROM told) AS n CROSS JOIN (SELECT count(*) FROM settled) AS s
UNION ALL
SELECT u.id, 'unchanged:' || u.state FROM unchanged u
