-- workflow_parents: mark the jobs of ids $1 as depended on (has_children)
-- and return each one's id, state and workflow. The update locks them
-- until the inserting transaction ends: a parent's end (which reads
-- has_children, then the edges, through workflow_settle) waits for the
-- edges to commit, and the states returned stay true until then, so the
-- insert counts what already holds its new jobs without a race. Ids
-- missing from the result have no job.
UPDATE {{schema}}.jobs
SET has_children = true
WHERE id = ANY ($1::bigint[])
RETURNING id, state, workflow_id
