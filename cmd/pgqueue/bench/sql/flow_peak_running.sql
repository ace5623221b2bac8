-- flow_peak_running: the most jobs of queue $1 that held a slot at once,
-- overall and per partition key, by the database: a job holds its slot from
-- its start (attempted_at, read after the claim lock) to its result
-- (finalized_at, the result transaction's start, before its commit, which
-- is before any claim that could see the slot free). At equal instants a
-- result counts before a start, so the count errs low only on exact ties.
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
