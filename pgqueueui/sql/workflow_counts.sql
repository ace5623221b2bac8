-- workflow_counts: the jobs of workflow $1 by state (no row: no job
-- belongs to it). An index-only scan of jobs_workflow_idx and a read of
-- each job's state: its cost grows with the workflow (at most
-- MaxWorkflowJobs jobs), not with the table.
SELECT {{schema}}.job_state(state, gate_id, queue) AS state, count(*)
FROM {{schema}}.jobs
WHERE workflow_id = $1
GROUP BY 1
