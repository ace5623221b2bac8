-- periodic_create: the first sight of periodic job $1. Its schedule starts
-- now, by the database clock: nothing before is due. No row back means the
-- row exists and another transaction holds it.
INSERT INTO {{schema}}.periodic_jobs (name, last_instant)
VALUES ($1, now())
ON CONFLICT (name) DO NOTHING
RETURNING last_instant, start_term, now()
