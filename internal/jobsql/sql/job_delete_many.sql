-- job_delete_many: job_delete.sql for the jobs of ids $1, in one statement.
-- Returns each job's id and what happened: 'deleted', or the current state
-- of a job kept (running). Ids missing from the result have no job.
--
-- The rows are locked first, in id order, as completions lock theirs (see
-- job_cancel_many.sql): the DELETE alone took them in the order of its
-- plan (a bitmap scan's: the table's), and could deadlock with them.
WITH locked AS MATERIALIZED (
    SELECT j.id
    FROM {{schema}}.jobs j
    WHERE j.id = ANY ($1::bigint[]) AND j.state <> 'running'
    ORDER BY j.id
    FOR UPDATE
), deleted AS (
    DELETE FROM {{schema}}.jobs
    WHERE id = ANY (ARRAY(SELECT id FROM locked)) AND state <> 'running'
    RETURNING id, has_children, workflow_id
), forgotten AS (
    -- See job_delete.sql: edges go with their jobs.
    SELECT {{schema}}.workflow_forget(array_agg(id)) FROM deleted
    WHERE has_children OR workflow_id IS NOT NULL HAVING count(*) > 0
), unchanged AS (
    SELECT j.id, j.state
    FROM {{schema}}.jobs j
    WHERE j.id = ANY ($1::bigint[]) AND NOT EXISTS (SELECT 1 FROM deleted d WHERE d.id = j.id)
    FOR KEY SHARE
)
SELECT d.id, 'deleted' FROM deleted d CROSS JOIN (SELECT count(*) FROM forgotten) AS f
UNION ALL
SELECT c.id, c.state FROM unchanged c
