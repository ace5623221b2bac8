-- periodic_jobs: the periodic jobs the maintenance leader has run, with the
-- last instant each is done up to, and the schedule and next instant the
-- leader last recorded (migration 9; the schedules live in the clients'
-- code).
SELECT name, last_instant, start_term, created_at, updated_at, schedule, next_at
FROM {{schema}}.periodic_jobs
ORDER BY name
