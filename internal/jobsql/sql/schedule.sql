-- schedule: make up to $1 due scheduled jobs available, oldest first, and
-- notify channel $2 once for each queue that got jobs.
WITH due AS (
    SELECT id
    FROM {{schema}}.jobs
    WHERE state = 'scheduled' AND run_at <= now()
    ORDER BY run_at, id
    LIMIT $1
    FOR UPDATE SKIP LOCKED
), moved AS (
    UPDATE {{schema}}.jobs j
    SET state = 'available'
    WHERE j.id = ANY (ARRAY(SELECT id FROM due))
    RETURNING j.queue
)
SELECT queue, count(*), pg_notify($2, queue)::text
FROM moved
GROUP BY queue
