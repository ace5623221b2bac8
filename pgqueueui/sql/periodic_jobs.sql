-- periodic_jobs: the periodic jobs the maintenance leader has run, with the
-- last instant each is done up to. Schedules live in the clients' code,
-- not here.
SELECT name, last_instant, start_term, created_at, updated_at
FROM {{schema}}.periodic_jobs
ORDER BY name
