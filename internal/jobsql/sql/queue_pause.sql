-- queue_pause: pause queue $1: no client claims from it (claim.sql) until
-- it is resumed. Pausing a paused queue keeps its first paused_at.
INSERT INTO {{schema}}.queues AS q (name, paused_at)
VALUES ($1, now())
ON CONFLICT (name) DO UPDATE SET paused_at = coalesce(q.paused_at, now()), updated_at = now()
