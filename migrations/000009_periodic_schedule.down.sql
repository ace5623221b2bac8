ALTER TABLE {{schema}}.periodic_jobs
    DROP COLUMN next_at,
    DROP COLUMN schedule;
