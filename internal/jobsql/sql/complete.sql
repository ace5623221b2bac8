-- complete: finish a running job, only if the caller still holds its fence,
-- in the caller's transaction (CompleteTx). A job some job depends on
-- releases its dependents in the same statement (see complete_many.sql).
WITH done AS (
    UPDATE {{schema}}.jobs
    SET state = 'completed', finalized_at = now(), lease_until = NULL
    WHERE id = $1 AND fence = $2 AND state = 'running'
    RETURNING id, has_children
), settled AS (
    SELECT {{schema}}.workflow_settle(array_agg(id), array_agg('completed'::text))
    FROM done WHERE has_children HAVING count(*) > 0
)
SELECT id FROM done WHERE (SELECT count(*) FROM settled) >= 0
