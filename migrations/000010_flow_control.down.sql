-- jobs first, as every client statement takes it before queues.
LOCK TABLE {{schema}}.jobs IN ACCESS EXCLUSIVE MODE;

DROP INDEX {{schema}}.jobs_sequence_idx;
DROP INDEX {{schema}}.jobs_running_idx;
CREATE INDEX jobs_running_lease_idx ON {{schema}}.jobs (lease_until) WHERE state = 'running';
DROP TABLE {{schema}}.flow_rates;
DROP FUNCTION {{schema}}.sequence_next(text, text, bigint);
DROP FUNCTION {{schema}}.flow_key(text, text, jsonb, boolean, text[]);

ALTER TABLE {{schema}}.queues
    DROP CONSTRAINT queues_rate_whole,
    DROP COLUMN sequence_continue,
    DROP COLUMN partition_by_args,
    DROP COLUMN partition_by_kind,
    DROP COLUMN rate_per_key,
    DROP COLUMN rate_period_us,
    DROP COLUMN rate_limit,
    DROP COLUMN max_running_per_key,
    DROP COLUMN max_running;

ALTER TABLE {{schema}}.jobs
    DROP COLUMN sequence_key,
    DROP COLUMN partition_key;
