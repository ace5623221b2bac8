-- job_parent_outputs: the jobs job $1 depends on, each with its state and
-- the output it recorded (NULL when none, or when the parent was pruned
-- or deleted: its edge went with it). Each parent is probed by its
-- primary key, as in job_parent_counts.sql.
SELECT d.parent_id, p.state, p.output
FROM {{schema}}.job_edges d
CROSS JOIN LATERAL (SELECT j.state, j.output FROM {{schema}}.jobs j WHERE j.id = d.parent_id OFFSET 0) p
WHERE d.child_id = $1
ORDER BY d.parent_id
