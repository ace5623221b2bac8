-- job_deps: the dependencies of job $1 in both directions, at most $2
-- each way: 'parent' rows are the jobs it waits for (those still holding
-- it first), 'child' rows the jobs that wait for it (those it still holds
-- first). Each side is limited before it is joined to jobs, so a job with
-- 10,000 parents costs 10,000 edges read and $2 jobs looked up. A job
-- deleted meanwhile has a null state.
(SELECT 'parent' AS dir, d.parent_id AS id, {{schema}}.job_state(j.state, j.gate_id, j.queue), d.on_failure, d.resolved
 FROM (SELECT e.parent_id, e.on_failure, e.resolved
       FROM {{schema}}.job_deps e
       WHERE e.child_id = $1
       UNION ALL
       SELECT g.parent_id, g.on_failure, g.resolved
       FROM {{schema}}.job_gate_edges g
       WHERE g.child_id = $1
       ORDER BY 3, 1
       LIMIT $2) d
 LEFT JOIN {{schema}}.jobs j ON j.id = d.parent_id
 ORDER BY d.resolved, d.parent_id)
UNION ALL
(SELECT 'child', d.child_id, {{schema}}.job_state(j.state, j.gate_id, j.queue), d.on_failure, d.resolved
 FROM (SELECT e.child_id, e.on_failure, e.resolved
       FROM {{schema}}.job_deps e
       WHERE e.parent_id = $1
       UNION ALL
       -- The children behind its gate, found among its workflow's jobs.
       SELECT g.child_id, g.on_failure, g.resolved
       FROM {{schema}}.job_gate_edges g
       WHERE g.parent_id = $1
         AND g.workflow_id = (SELECT p.workflow_id FROM {{schema}}.jobs p WHERE p.id = $1)
       ORDER BY 3, 1
       LIMIT $2) d
 LEFT JOIN {{schema}}.jobs j ON j.id = d.child_id
 ORDER BY d.resolved, d.child_id)
