-- job_parent_outputs: the jobs job $1 depends on, each with its state and
-- the output it recorded (NULL when none, or when the parent was pruned
-- or deleted: its edge went with it).
SELECT d.parent_id, p.state, p.output
FROM (SELECT parent_id FROM {{schema}}.job_deps WHERE child_id = $1
      UNION ALL
      SELECT parent_id FROM {{schema}}.job_gate_edges WHERE child_id = $1) d
JOIN {{schema}}.jobs p ON p.id = d.parent_id
ORDER BY d.parent_id
