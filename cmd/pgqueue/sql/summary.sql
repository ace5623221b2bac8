-- summary: the run as the database recorded it: jobs completed, completed
-- after failed attempts, discarded, and attempts in all.
SELECT count(*) FILTER (WHERE state = 'completed'),
       count(*) FILTER (WHERE state = 'completed' AND attempt > 1),
       count(*) FILTER (WHERE state = 'discarded'),
       coalesce(sum(attempt), 0)
FROM {{schema}}.jobs
