-- summary: the run as the database recorded it: jobs completed, completed
-- after failed attempts, discarded, and attempts in all; then the jobs due
-- at once and the seconds from the enqueue to the last of them finished,
-- and the same for the jobs scheduled ahead (tagged $1).
SELECT count(*) FILTER (WHERE state = 'completed'),
       count(*) FILTER (WHERE state = 'completed' AND attempt > 1),
       count(*) FILTER (WHERE state = 'discarded'),
       coalesce(sum(attempt), 0),
       count(*) FILTER (WHERE NOT $1 = ANY (tags)),
       coalesce(extract(epoch FROM max(finalized_at) FILTER (WHERE NOT $1 = ANY (tags)) - min(created_at)), 0)::float8,
       count(*) FILTER (WHERE $1 = ANY (tags)),
       coalesce(extract(epoch FROM max(finalized_at) FILTER (WHERE $1 = ANY (tags)) - min(created_at)), 0)::float8
FROM {{schema}}.jobs
