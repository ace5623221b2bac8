-- stats_running: running jobs by the client that claimed them, and the
-- longest-running one's age, by the database clock. Reads the running
-- rows through jobs_running_idx.
SELECT worker_id, queue, count(*) AS running,
       (extract(epoch FROM now() - min(attempted_at)) * 1000000)::bigint AS longest_us
FROM {{schema}}.jobs
WHERE state = 'running'
GROUP BY worker_id, queue
ORDER BY worker_id, queue
