-- job_parent_counts: how the jobs job $1 depends on stand, counted by
-- state (a batch's callback reads how each job of its batch ended).
SELECT p.state, count(*)
FROM {{schema}}.job_deps d JOIN {{schema}}.jobs p ON p.id = d.parent_id
WHERE d.child_id = $1
GROUP BY p.state
