-- job_outcome: read a job back to learn whether a write whose outcome was
-- unknown landed: it did if the row still carries the writer's fence and is
-- no longer running.
SELECT state, fence FROM {{schema}}.jobs WHERE id = $1
