-- queue_resume: resume queue $1 and wake the listeners of channel $2 for it
-- at commit, so producers claim its jobs at once. A queue never paused has
-- no row and gets none.
WITH resumed AS (
    UPDATE {{schema}}.queues
    SET paused_at = NULL, updated_at = now()
    WHERE name = $1 AND paused_at IS NOT NULL
)
SELECT pg_notify($2, $1::text)
