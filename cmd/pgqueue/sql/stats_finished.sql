-- stats_finished: jobs finished in the last hour and minute, by queue and
-- final state. A range scan of jobs_finalized_idx over the last hour: its
-- cost grows with the jobs finished in that hour, not with the table.
SELECT queue, state,
       count(*) FILTER (WHERE finalized_at > now() - interval '1 minute') AS last_minute,
       count(*) AS last_hour
FROM {{schema}}.jobs
WHERE finalized_at > now() - interval '1 hour'
GROUP BY queue, state
ORDER BY queue, state
