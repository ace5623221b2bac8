DROP FUNCTION {{schema}}.unique_key(bytea, bigint, timestamptz);
DROP INDEX {{schema}}.jobs_unique_idx;
ALTER TABLE {{schema}}.jobs DROP COLUMN unique_states, DROP COLUMN unique_key;
