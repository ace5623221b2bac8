-- workflow_counts: the jobs of workflow $1 by state (no row: no job
-- belongs to it). An index-only scan of jobs_workflow_idx and a read of
-- each job's state: its cost grows with the workflow (at most
-- MaxWorkflowJobs jobs), not with the table.
SELECT state, count(*)
FROM {{schema}}.jobs
WHERE workflow_id = $1
GROUP BY state
