-- job_parent_counts: how the jobs job $1 depends on stand, counted by
-- state (a batch's callback reads how each job of its batch ended).
SELECT p.state, count(*)
FROM (SELECT parent_id FROM {{schema}}.job_deps WHERE child_id = $1
      UNION ALL
      SELECT parent_id FROM {{schema}}.job_gate_edges WHERE child_id = $1) d
JOIN {{schema}}.jobs p ON p.id = d.parent_id
GROUP BY p.state
