-- job_outcomes: read jobs back to learn whether writes whose outcome was
-- unknown landed: a job's did if it still carries the writer's fence and
-- is no longer running.
SELECT id, state, fence FROM {{schema}}.jobs WHERE id = ANY($1::bigint[])
