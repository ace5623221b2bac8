-- job_workflow: job $1's workflow (null outside one) and how many jobs it
-- depends on and how many depend on it (each at most MaxJobDependencies
-- and MaxWorkflowJobs: index-only counts; the children behind its gate
-- counted among its workflow's jobs). No row: no such job.
SELECT j.workflow_id,
       (SELECT count(*) FROM {{schema}}.job_deps d WHERE d.child_id = j.id) + (j.gate_id IS NOT NULL)::int,
       (SELECT count(*) FROM {{schema}}.job_deps d WHERE d.parent_id = j.id)
       + (SELECT count(*) FROM {{schema}}.jobs c WHERE c.workflow_id = j.workflow_id AND c.gate_id = j.id)
FROM {{schema}}.jobs j
WHERE j.id = $1
