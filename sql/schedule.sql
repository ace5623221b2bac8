-- schedule: make up to $1 due scheduled jobs available, oldest first, and
-- report their queues so local producers can be woken.
WITH due AS (
    SELECT id
    FROM {{schema}}.jobs
    WHERE state = 'scheduled' AND run_at <= now()
    ORDER BY run_at, id
    LIMIT $1
    FOR UPDATE SKIP LOCKED
)
UPDATE {{schema}}.jobs j
SET state = 'available'
FROM due
WHERE j.id = due.id
RETURNING j.queue
