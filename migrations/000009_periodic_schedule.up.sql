-- What the maintenance leader last knew of each periodic job's schedule,
-- for operators (pgqueue's dashboard): schedules live in the clients'
-- code, so the leader writes the schedule's text and its next instant
-- whenever they change. Nothing reads them to decide what is due.
ALTER TABLE {{schema}}.periodic_jobs
    ADD COLUMN schedule text,
    ADD COLUMN next_at timestamptz;
