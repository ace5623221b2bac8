-- claim_flow: claim.sql for a queue with flow limits (docs/concepts/
-- flow-control.md): take up to $2 available jobs of queue $1 for worker
-- $4, with a lease of $3 microseconds, as far as the queue's limits allow.
-- It claims only under the queue's claim lock (claim_lock.sql notes it in
-- pgqueue.claim_locked; without it q is empty and so is the claim): claims
-- of the queue then run one at a time, and this statement's snapshot,
-- taken after the lock was granted, holds every earlier claim and every
-- result committed before it. Counting running rows is then exact: a job
-- holds its slot from its claim until the fenced write that ends it, or
-- the rescue of its expired lease, commits. A result committing meanwhile
-- only frees a slot this claim does not see yet.
--
-- Limits, each null for none:
--   max_running          running jobs of the queue
--   max_running_per_key  running jobs per partition key (flow_key)
--   rate_limit           starts per rate_period_us of the queue or, with
--                        rate_per_key, of each key; flow_rates keeps the
--                        recent starts of each, in time order
-- Jobs without a partition key are not limited per key.
WITH jobs_first AS (
    -- Reads nothing: it makes jobs the first table the statement locks,
    -- before queues, as migrations take them (the other order deadlocked
    -- with a migration; see poll.sql). The planner drops it.
    SELECT FROM {{schema}}.jobs WHERE false
), q AS (
    SELECT l.max_running, l.max_running_per_key, l.rate_limit,
           l.rate_period_us * interval '1 microsecond' AS rate_period,
           coalesce(l.rate_per_key, false) AS rate_per_key,
           coalesce(l.partition_by_kind, false) AS by_kind,
           coalesce(l.partition_by_args, '{}') AS by_args,
           -- Whether a limit applies per partition key: only then are keys
           -- computed and the candidate window wider than the claim.
           (l.max_running_per_key IS NOT NULL OR coalesce(l.rate_per_key, false)) AS per_key,
           -- The claim's instant, read after the lock: starts are recorded
           -- and windows measured by it, so they follow the lock's order.
           clock_timestamp() AS at
    FROM (SELECT 1) AS one
    LEFT JOIN {{schema}}.queues l ON l.name = $1
    WHERE current_setting('pgqueue.claim_locked', true) = $1 AND l.paused_at IS NULL
), running AS (
    -- q's settings reach flow_key as columns, not subqueries, so that the
    -- planner inlines it (it keeps a function call per row when an
    -- argument holds a subquery).
    SELECT CASE WHEN q.per_key
                THEN {{schema}}.flow_key(j.partition_key, j.kind, j.args, q.by_kind, q.by_args) END AS key
    FROM q, {{schema}}.jobs j
    WHERE j.state = 'running' AND j.queue = $1
), running_keys AS (
    SELECT key, count(*) AS n FROM running WHERE key IS NOT NULL GROUP BY key
), room AS (
    -- least() skips the nulls of the limits that are not set.
    SELECT least($2::bigint,
                 q.max_running - (SELECT count(*) FROM running),
                 CASE WHEN q.rate_limit IS NOT NULL AND NOT q.rate_per_key
                      THEN q.rate_limit - (SELECT count(*)
                                           FROM {{schema}}.flow_rates r, unnest(r.starts) AS s(at)
                                           WHERE r.queue = $1 AND r.key = '' AND s.at > q.at - q.rate_period)
                 END) AS n
    FROM q
), candidates AS (
    -- The first available jobs in claim order, passing over those whose
    -- key is at its running limit or has used its rate, and the jobs of a
    -- sequence that are not its next. Read through jobs_fetch_idx like
    -- claim.sql's; with a limit per key the window is wider than the
    -- claim, since a key under its limit may still have fewer slots left
    -- than jobs here. No row locks (FOR UPDATE): claims of the queue run
    -- one at a time under its lock, so none takes these rows meanwhile,
    -- and locking the window cost a write per row, most of them for rows
    -- not claimed. A job another statement changed since this snapshot
    -- (a cancel) fails the UPDATE's state check, which reads the row's
    -- newest version, and is left out.
    SELECT c.id, c.priority, c.run_at, c.key,
           row_number() OVER (PARTITION BY c.key ORDER BY c.priority, c.run_at, c.id) AS rank
    FROM (
        SELECT j.id, j.priority, j.run_at, k.key
        FROM {{schema}}.jobs j
        CROSS JOIN LATERAL (SELECT CASE WHEN q.per_key
                                        THEN {{schema}}.flow_key(j.partition_key, j.kind, j.args, q.by_kind, q.by_args) END AS key
                            FROM q) AS k
        WHERE j.state = 'available' AND j.queue = $1
          AND (SELECT n FROM room) > 0
          AND (j.sequence_key IS NULL OR {{schema}}.sequence_next(j.queue, j.sequence_key, j.id))
          AND (k.key IS NULL OR (
                k.key NOT IN (SELECT key FROM running_keys WHERE n >= (SELECT max_running_per_key FROM q))
                AND NOT EXISTS (
                    SELECT 1 FROM {{schema}}.flow_rates r
                    WHERE (SELECT rate_per_key FROM q) AND r.queue = $1 AND r.key = k.key
                      AND cardinality(r.starts) >= (SELECT rate_limit FROM q)
                      AND r.starts[cardinality(r.starts) - (SELECT rate_limit FROM q) + 1]
                          > (SELECT at - rate_period FROM q))))
        ORDER BY j.priority, j.run_at, j.id
        LIMIT (SELECT CASE WHEN q.per_key THEN 4 * greatest(n, 0) + 32 ELSE greatest(n, 0) END FROM room, q)
    ) AS c
), picked AS (
    SELECT c.id, c.key
    FROM candidates c
    LEFT JOIN running_keys r ON r.key = c.key
    WHERE c.key IS NULL
       OR ((c.rank <= (SELECT max_running_per_key FROM q) - coalesce(r.n, 0)) IS NOT FALSE
           AND (NOT (SELECT rate_per_key FROM q)
                OR c.rank <= (SELECT rate_limit FROM q)
                             - (SELECT count(*)
                                FROM {{schema}}.flow_rates t, unnest(t.starts) AS s(at)
                                WHERE t.queue = $1 AND t.key = c.key
                                  AND s.at > (SELECT at - rate_period FROM q))))
    ORDER BY c.priority, c.run_at, c.id
    LIMIT (SELECT greatest(n, 0) FROM room)
), claimed AS (
    UPDATE {{schema}}.jobs j
    SET state        = 'running',
        attempt      = j.attempt + 1,
        fence        = nextval('{{schema}}.fence_seq'),
        lease_until  = now() + $3::bigint * interval '1 microsecond',
        worker_id    = $4,
        attempted_at = (SELECT at FROM q)
    WHERE j.id = ANY (ARRAY(SELECT id FROM picked)) AND j.state = 'available'
    RETURNING j.id, j.queue, j.kind, j.args, j.priority, j.state, j.attempt, j.max_attempts,
              j.run_at, j.fence, j.lease_until, j.worker_id,
              CASE WHEN pg_column_size(j.errors) > 8 THEN j.errors END AS errors,
              CASE WHEN cardinality(j.tags) > 0 THEN j.tags END AS tags,
              CASE WHEN pg_column_size(j.meta) > 8 THEN j.meta END AS meta,
              j.created_at, j.attempted_at, j.finalized_at, j.singleton_key,
              j.partition_key, j.sequence_key
), started AS (
    -- Each start joins its rate's window; starts that left it are dropped,
    -- so a row holds at most rate_limit of them, oldest first.
    INSERT INTO {{schema}}.flow_rates AS r (queue, key, starts)
    SELECT $1, CASE WHEN (SELECT rate_per_key FROM q) THEN p.key ELSE '' END,
           array_agg((SELECT at FROM q))
    FROM picked p
    WHERE (SELECT rate_limit FROM q) IS NOT NULL
      AND (p.key IS NOT NULL OR NOT (SELECT rate_per_key FROM q))
    GROUP BY 2
    ON CONFLICT (queue, key) DO UPDATE
    SET starts = ARRAY(SELECT s FROM unnest(r.starts) AS s WHERE s > (SELECT at - rate_period FROM q) ORDER BY s)
                 || excluded.starts
)
SELECT * FROM claimed
