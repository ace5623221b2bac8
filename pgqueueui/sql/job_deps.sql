-- job_deps: the dependencies of job $1 in both directions, at most $2
-- each way: 'parent' rows are the jobs it waits for (those still holding
-- it first), 'child' rows the jobs that wait for it (those it still holds
-- first). Each side is limited before it is joined to jobs, so a job with
-- 10,000 parents costs 10,000 edges read and $2 jobs looked up. A job
-- deleted meanwhile has a null state.
(SELECT 'parent' AS dir, d.parent_id AS id, j.state, d.on_failure, d.resolved
 FROM (SELECT e.parent_id, e.on_failure, e.resolved
       FROM {{schema}}.job_deps e
       WHERE e.child_id = $1
       ORDER BY e.resolved, e.parent_id
       LIMIT $2) d
 LEFT JOIN {{schema}}.jobs j ON j.id = d.parent_id
 ORDER BY d.resolved, d.parent_id)
UNION ALL
(SELECT 'child', d.child_id, j.state, d.on_failure, d.resolved
 FROM (SELECT e.child_id, e.on_failure, e.resolved
       FROM {{schema}}.job_deps e
       WHERE e.parent_id = $1
       ORDER BY e.resolved, e.child_id
       LIMIT $2) d
 LEFT JOIN {{schema}}.jobs j ON j.id = d.child_id
 ORDER BY d.resolved, d.child_id)
