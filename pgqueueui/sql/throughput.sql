-- throughput: jobs finished in each of the last 60 minutes (the current
-- one included), oldest first, by the database clock. The inner count is a
-- range scan of jobs_finalized_idx bounded to that hour, index-only where
-- the visibility map allows: its cost grows with the jobs finished in the
-- hour, never with the table. The series fills minutes that had none.
WITH counts AS (
    SELECT date_trunc('minute', finalized_at) AS minute, count(*) AS n
    FROM {{schema}}.jobs
    WHERE finalized_at >= date_trunc('minute', now()) - interval '59 minutes'
    GROUP BY 1
)
SELECT m.minute, coalesce(c.n, 0)
FROM generate_series(date_trunc('minute', now()) - interval '59 minutes',
                     date_trunc('minute', now()), interval '1 minute') AS m(minute)
LEFT JOIN counts c ON c.minute = m.minute
ORDER BY m.minute
