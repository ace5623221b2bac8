-- flow_span: how many jobs of queue $1 finished, and the seconds from the
-- first start to the last result, by the database: a run's throughput
-- without the clients' start-up (their first poll tells the producers of
-- a limited queue its limits) or their stop.
SELECT count(finalized_at), coalesce(extract(epoch FROM max(finalized_at) - min(attempted_at)), 0)::float8
FROM {{schema}}.jobs
WHERE queue = $1 AND attempted_at IS NOT NULL
