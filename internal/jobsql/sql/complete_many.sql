-- complete_many: the common batch, every job of it completed: finish.sql
-- without the per-row choices. Same fencing. The jobs some job depends on
-- (has_children) release their dependents in the same statement
-- (workflow_settle, in migrations/000012_workflows.up.sql), only through
-- the rows this fenced update changed: a refused completion releases
-- nothing. Without such a job in the batch the function is not called.
WITH r AS (
    SELECT * FROM unnest($1::bigint[], $2::bigint[]) AS r(id, fence)
), done AS (
    UPDATE {{schema}}.jobs j
    SET state = 'completed', finalized_at = now(), lease_until = NULL
    FROM r
    -- The state is tested inside a CASE, which the planner cannot match to
    -- jobs_running_idx's predicate: after an ANALYZE of a quiet queue the
    -- statistics say no job runs, and it then read every running row of the
    -- index for each batch (all 100,000 of a burst, for 200 completions).
    -- The batch is found through the primary key whatever the estimate.
    WHERE j.id = ANY ($1::bigint[]) AND j.id = r.id AND j.fence = r.fence AND CASE WHEN j.state = 'running' THEN true END
    RETURNING j.id, j.has_children
), settled AS (
    SELECT {{schema}}.workflow_settle(array_agg(id), array_agg('completed'::text))
    FROM done WHERE has_children HAVING count(*) > 0
)
-- Nearly every job of a batch is written, so the statement returns the
-- exceptions, not a row per job (output and parsing cost a few tenths of
-- a µs per job): always one row with a null id carrying how many
-- dependents the batch changed (null when none; a client without a
-- listen connection then wakes its producers, so that a released job is
-- claimed at once rather than at the next poll), then one row per id of
-- the batch the update refused (stale fence, no longer running, deleted).
-- That first row is what runs settled: a SELECT in WITH is evaluated only
-- when the query reads it.
SELECT NULL::bigint AS id, (SELECT s FROM settled AS t(s)) AS settled
UNION ALL
-- The count is a one-time filter: a batch written whole looks up no id.
-- unnest($1), not r: read twice, r would be materialized (copied) for
-- every batch.
SELECT b.id, NULL FROM unnest($1::bigint[]) AS b(id)
WHERE (SELECT count(*) FROM done) < cardinality($1::bigint[]) AND b.id NOT IN (SELECT id FROM done)
