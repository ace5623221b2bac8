-- job_parent_outputs: the jobs job $1 depends on, each with its state and
-- the output it recorded (NULL when none, or when the parent was pruned
-- or deleted: its edge went with it).
SELECT d.parent_id, p.state, p.output
FROM {{schema}}.job_deps d JOIN {{schema}}.jobs p ON p.id = d.parent_id
WHERE d.child_id = $1
ORDER BY d.parent_id
