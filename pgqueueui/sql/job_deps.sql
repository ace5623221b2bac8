-- job_deps: the dependencies of job $1 in both directions, at most $2
-- each way: 'parent' rows are the jobs it waits for (those still holding
-- it first), 'child' rows the jobs that wait for it (those it still holds
-- first). A job deleted meanwhile has a null state.
(SELECT 'parent' AS dir, d.parent_id AS id, j.state, d.on_failure, d.resolved
 FROM {{schema}}.job_deps d LEFT JOIN {{schema}}.jobs j ON j.id = d.parent_id
 WHERE d.child_id = $1
 ORDER BY d.resolved, d.parent_id
 LIMIT $2)
UNION ALL
(SELECT 'child', d.child_id, j.state, d.on_failure, d.resolved
 FROM {{schema}}.job_deps d LEFT JOIN {{schema}}.jobs j ON j.id = d.child_id
 WHERE d.parent_id = $1
 ORDER BY d.resolved, d.child_id
 LIMIT $2)
