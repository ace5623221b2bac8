-- complete_many: the common batch, every job of it completed: finish.sql
-- without the per-row choices. Same fencing; the ids returned are the jobs
-- that were still held, each with the count of dependents settled. The
-- jobs some job depends on (has_children) release their dependents in
-- the same statement (workflow_settle, in migrations/000012_workflows.up.sql),
-- only through the rows this fenced update changed: a refused completion
-- releases nothing. Without such a job in the batch the function is not
-- called.
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
-- settled is referred to so that it runs: a SELECT in WITH is evaluated
-- only when the query reads it; the WHERE runs it before the first row of
-- done is read (a one-time filter), even when done is empty. Each row
-- carries how many dependents the batch changed (null when none was
-- settled): a client without a listen connection then wakes its
-- producers, so that a released job is claimed at once rather than at
-- the next poll.
SELECT id, (SELECT s FROM settled AS t(s)) AS settled FROM done WHERE (SELECT count(*) FROM settled) >= 0
