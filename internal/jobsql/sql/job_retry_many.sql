-- job_retry_many: job_retry.sql for the jobs of ids $1, in one statement,
-- waking the listeners of channel $2 once per queue at commit (PostgreSQL
-- folds equal notifications of a transaction). Returns each job's id,
-- queue and what happened: 'retried', or the current state of a job left
-- alone (available, or running). Ids missing from the result have no job.
--
-- The rows are locked first, in id order, as completions lock theirs (see
-- job_cancel_many.sql): the UPDATE alone took them in the order of its
-- plan (a bitmap scan's: the table's), and could deadlock with them. FOR
-- NO KEY UPDATE is the lock the UPDATE takes.
WITH locked AS MATERIALIZED (
    SELECT j.id
    FROM {{schema}}.jobs j
    WHERE j.id = ANY ($1::bigint[]) AND j.state IN ('scheduled', 'completed', 'discarded', 'cancelled')
    ORDER BY j.id
    FOR NO KEY UPDATE
), retried AS (
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
    WHERE id = ANY (ARRAY(SELECT id FROM locked)) AND state IN ('scheduled', 'completed', 'discarded', 'cancelled')
    RETURNING id, queue, has_children
), resumed AS (
    -- See job_retry.sql: retrying a failed parent resumes its workflow.
    SELECT {{schema}}.workflow_resume(array_agg(id)) FROM retried WHERE has_children HAVING count(*) > 0
), unchanged AS (
    SELECT j.id, j.queue, j.state
    FROM {{schema}}.jobs j
    WHERE j.id = ANY ($1::bigint[]) AND NOT EXISTS (SELECT 1 FROM retried r WHERE r.id = j.id)
    FOR KEY SHARE
)
SELECT r.id, r.queue, 'retried' FROM retried r CROSS JOIN LATERAL (SELECT pg_notify($2, r.queue)) n
    CROSS JOIN (SELECT count(*) FROM resumed) AS s
UNION ALL
SELECT c.id, c.queue, c.state FROM unchanged c
