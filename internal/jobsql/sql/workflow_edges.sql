-- workflow_edges: the dependency edges into the jobs of workflow $1.
-- Gated children's gates count as edges (job_gate_edges).
SELECT d.parent_id, d.child_id, d.on_failure, d.resolved
FROM {{schema}}.jobs j JOIN {{schema}}.job_deps d ON d.child_id = j.id
WHERE j.workflow_id = $1
UNION ALL
SELECT g.parent_id, g.child_id, g.on_failure, g.resolved
FROM {{schema}}.job_gate_edges g
WHERE g.workflow_id = $1
ORDER BY 2, 1
