-- complete_many: the common batch, every job of it completed: finish.sql
-- without the per-row choices. Same fencing; the ids returned are the jobs
-- that were still held.
WITH r AS (
    SELECT * FROM unnest($1::bigint[], $2::bigint[]) AS r(id, fence)
)
UPDATE {{schema}}.jobs j
SET state = 'completed', finalized_at = now(), lease_until = NULL
FROM r
WHERE j.id = ANY ($1::bigint[]) AND j.id = r.id AND j.fence = r.fence AND j.state = 'running'
RETURNING j.id
