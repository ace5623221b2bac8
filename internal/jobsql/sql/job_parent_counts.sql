-- job_parent_counts: how the jobs job $1 depends on stand, counted by
-- state (a batch's callback reads how each job of its batch ended). Each
-- parent is probed by its primary key (OFFSET 0 keeps the subquery from
-- being pulled up into a join): joined, with statistics from before the
-- parents were inserted, the planner merge-joined the edges with the
-- primary key read from its start.
SELECT p.state, count(*)
FROM {{schema}}.job_edges d
CROSS JOIN LATERAL (SELECT j.state FROM {{schema}}.jobs j WHERE j.id = d.parent_id OFFSET 0) p
WHERE d.child_id = $1
GROUP BY p.state
