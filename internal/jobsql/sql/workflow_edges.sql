-- workflow_edges: the dependency edges into the jobs of workflow $1.
SELECT d.parent_id, d.child_id, d.on_failure, d.resolved
FROM {{schema}}.jobs j JOIN {{schema}}.job_deps d ON d.child_id = j.id
WHERE j.workflow_id = $1
ORDER BY d.child_id, d.parent_id
