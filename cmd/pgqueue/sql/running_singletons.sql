-- running_singletons: the singleton keys of running jobs, so that locks can
-- name the advisory locks they hold.
SELECT DISTINCT singleton_key FROM {{schema}}.jobs
WHERE state = 'running' AND singleton_key IS NOT NULL
