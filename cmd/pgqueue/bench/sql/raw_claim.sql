-- raw_claim: the raw ceiling's claim: pgqueue's claim statement, written out
-- by hand. Up to $2 available jobs of queue $1.
WITH picked AS (
    SELECT id
    FROM {{schema}}.jobs
    WHERE state = 'available' AND queue = $1
    ORDER BY priority, run_at, id
    LIMIT $2
    FOR UPDATE SKIP LOCKED
)
UPDATE {{schema}}.jobs j
SET state = 'running', attempt = j.attempt + 1, fence = nextval('{{schema}}.fence_seq'),
    lease_until = now() + interval '30 seconds', worker_id = 'raw', attempted_at = now()
WHERE j.id = ANY (ARRAY(SELECT id FROM picked))
RETURNING j.id, j.fence
