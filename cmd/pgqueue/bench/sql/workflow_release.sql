-- workflow_release: for every job with dependencies, the seconds from the
-- completion of the last of its parents to its start, by the database
-- clock; returns their count, median, 95th percentile and maximum. Its
-- edges and its gate alike (job_edges).
WITH waits AS (
    SELECT extract(epoch FROM c.attempted_at - max(p.finalized_at))::float8 AS s
    FROM {{schema}}.job_edges d
    JOIN {{schema}}.jobs p ON p.id = d.parent_id
    JOIN {{schema}}.jobs c ON c.id = d.child_id
    GROUP BY c.id, c.attempted_at
)
SELECT count(*),
       coalesce(percentile_cont(0.5) WITHIN GROUP (ORDER BY s), 0),
       coalesce(percentile_cont(0.95) WITHIN GROUP (ORDER BY s), 0),
       coalesce(max(s), 0)
FROM waits
