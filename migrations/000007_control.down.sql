DROP TABLE {{schema}}.queues;

ALTER TABLE {{schema}}.jobs
    DROP COLUMN progress,
    DROP COLUMN output,
    DROP COLUMN cancel_requested_at;
