-- latency: the p50, p95 and p99 of enqueue→start of the sustained run's
-- jobs, in seconds, both ends by the database clock.
SELECT percentile_cont(0.50) WITHIN GROUP (ORDER BY d),
       percentile_cont(0.95) WITHIN GROUP (ORDER BY d),
       percentile_cont(0.99) WITHIN GROUP (ORDER BY d)
FROM (SELECT extract(epoch FROM attempted_at - created_at) AS d
      FROM {{schema}}.jobs WHERE kind = 'bench_noop' AND attempted_at IS NOT NULL) l
