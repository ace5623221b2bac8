-- workflow_page: a page of workflow $1's jobs in id order, after job id
-- $2 (0 for the first page), at most $3: jobs_workflow_idx (workflow_id,
-- id) gives the keyset, so a later page costs what the first does. For
-- each job, how many jobs it depends on and how many of those still hold
-- it (pending_parents, kept by the writes that settle edges).
SELECT j.id, j.queue, j.kind, j.state, j.attempt, j.max_attempts,
       (SELECT count(*) FROM {{schema}}.job_deps d WHERE d.child_id = j.id) AS parents,
       coalesce(j.pending_parents, 0) AS pending
FROM {{schema}}.jobs j
WHERE j.workflow_id = $1 AND j.id > $2
ORDER BY j.id
LIMIT $3
