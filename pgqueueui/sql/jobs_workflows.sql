-- jobs_workflows: the workflow of each job of ids $1 (a page of the jobs
-- list) that belongs to one.
SELECT id, workflow_id
FROM {{schema}}.jobs
WHERE id = ANY ($1::bigint[]) AND workflow_id IS NOT NULL
