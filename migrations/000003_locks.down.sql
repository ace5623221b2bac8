ALTER TABLE {{schema}}.jobs DROP COLUMN IF EXISTS singleton_key;
DROP TABLE IF EXISTS {{schema}}.leases;
