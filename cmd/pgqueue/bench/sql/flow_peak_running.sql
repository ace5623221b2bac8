-- flow_peak_running: the most jobs of queue $1 that held a lease at once,
-- overall and per partition key, by the database: a job holds it from its
-- start (attempted_at) to its result (finalized_at, the result
-- transaction's start, before its commit). A limited queue's claim reads
-- attempted_at after the claim lock, after every commit it saw, so there
-- the count is exact (at equal instants a result counts before a start).
-- The plain claim sets its transaction's start, which can precede the
-- lock's grant: without limits the peak may count too high.
WITH events AS (
    SELECT partition_key AS key, attempted_at AS at, 1 AS d
    FROM {{schema}}.jobs WHERE queue = $1 AND attempted_at IS NOT NULL
    UNION ALL
    SELECT partition_key, finalized_at, -1
    FROM {{schema}}.jobs WHERE queue = $1 AND attempted_at IS NOT NULL AND finalized_at IS NOT NULL
), counted AS (
    SELECT sum(d) OVER (ORDER BY at, d ROWS UNBOUNDED PRECEDING) AS running,
           CASE WHEN key IS NOT NULL
                THEN sum(d) OVER (PARTITION BY key ORDER BY at, d ROWS UNBOUNDED PRECEDING) END AS key_running
    FROM events
)
SELECT coalesce(max(running), 0), coalesce(max(key_running), 0) FROM counted
