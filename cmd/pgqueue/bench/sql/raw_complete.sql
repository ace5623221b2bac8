-- raw_complete: the raw ceiling's completion: one fenced statement per batch
-- of ids $1 with their fences $2.
UPDATE {{schema}}.jobs j
SET state = 'completed', finalized_at = now(), lease_until = NULL
FROM unnest($1::bigint[], $2::bigint[]) AS c(id, fence)
WHERE j.id = ANY ($1::bigint[]) AND j.id = c.id AND j.fence = c.fence AND j.state = 'running'
