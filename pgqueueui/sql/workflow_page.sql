-- workflow_page: a page of workflow $1's jobs in id order, after job id
-- $2 (0 for the first page), at most $3: jobs_workflow_idx (workflow_id,
-- id) gives the keyset, so a later page costs what the first does. For
-- each job, how many jobs it depends on and how many of those still hold
-- it (pending_parents, kept by the writes that settle edges; a gate's
-- child's one parent no longer holds it once the gate opened).
SELECT j.id, j.queue, j.kind, {{schema}}.job_state(j.state, j.gate_id, j.queue), j.attempt, j.max_attempts,
       (SELECT count(*) FROM {{schema}}.job_deps d WHERE d.child_id = j.id) + (j.gate_id IS NOT NULL)::int AS parents,
       CASE WHEN j.gate_id IS NOT NULL AND NOT {{schema}}.gate_closed(j.gate_id, j.queue) THEN 0
            ELSE coalesce(j.pending_parents, 0) END AS pending
FROM {{schema}}.jobs j
WHERE j.workflow_id = $1 AND j.id > $2
ORDER BY j.id
LIMIT $3
