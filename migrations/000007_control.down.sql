-- jobs first, as every client statement takes it before queues: taking
-- queues first deadlocked with a running client's claim or poll.
LOCK TABLE {{schema}}.jobs IN ACCESS EXCLUSIVE MODE;

DROP TABLE {{schema}}.queues;

ALTER TABLE {{schema}}.jobs
    DROP COLUMN progress,
    DROP COLUMN output,
    DROP COLUMN cancel_requested_at;
