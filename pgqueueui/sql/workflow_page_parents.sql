-- workflow_page_parents: for each job of ids $1 (a page of a workflow),
-- the jobs it depends on, at most $2 each: those that still hold it
-- first, then by id. A parent deleted meanwhile has a null state.
SELECT c.id, d.parent_id, {{schema}}.job_state(p.state, p.gate_id, p.queue), d.on_failure, d.resolved
FROM unnest($1::bigint[]) AS c(id)
CROSS JOIN LATERAL (
    (SELECT e.parent_id, e.on_failure, e.resolved
     FROM {{schema}}.job_deps e
     WHERE e.child_id = c.id
     ORDER BY e.resolved, e.parent_id
     LIMIT $2)
    UNION ALL
    SELECT g.parent_id, g.on_failure, g.resolved
    FROM {{schema}}.job_gate_edges g
    WHERE g.child_id = c.id
) d
LEFT JOIN {{schema}}.jobs p ON p.id = d.parent_id
ORDER BY c.id, d.resolved, d.parent_id
