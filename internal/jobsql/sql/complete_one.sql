-- complete_one: complete_many.sql for a batch of one job, $1 under fence
-- $2, with the same fencing and the same rows back. Its parameters are
-- scalars, so it is prepared once per connection and keeps a generic plan
-- (the primary key): complete_many.sql's arrays are planned at every call,
-- which in a batch of one was 120 µs of the statement's 270 µs on the
-- server. A queue with little traffic completes its jobs one at a time.
WITH done AS (
    UPDATE {{schema}}.jobs j
    SET state = 'completed', finalized_at = now(), lease_until = NULL
    -- The state inside a CASE, as in complete_many.sql: a generic plan
    -- must not read jobs_running_idx (after an ANALYZE of a quiet queue,
    -- the statistics say no job runs).
    WHERE j.id = $1 AND j.fence = $2 AND CASE WHEN j.state = 'running' THEN true END
    RETURNING j.id, j.has_children
), settled AS (
    SELECT {{schema}}.workflow_settle(array_agg(id), array_agg('completed'::text))
    FROM done WHERE has_children HAVING count(*) > 0
)
-- As complete_many.sql: the row with a null id carries the count of
-- dependents changed (and runs settled); a row with the id says the
-- update refused it.
SELECT NULL::bigint AS id, (SELECT s FROM settled AS t(s)) AS settled
UNION ALL
SELECT $1::bigint, NULL WHERE NOT EXISTS (SELECT 1 FROM done)
