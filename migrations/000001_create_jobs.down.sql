DROP TABLE IF EXISTS {{schema}}.jobs;
DROP SEQUENCE IF EXISTS {{schema}}.fence_seq;
