-- claim: take up to $2 available jobs of queue $1 for worker $4, each with a
-- new fence token and a lease of $3 microseconds. SKIP LOCKED lets concurrent
-- claimers pass over each other's rows instead of waiting on them. The
-- picked ids reach the UPDATE as an array, so it finds its rows through the
-- primary key: joined to the CTE instead, the planner may hash the whole
-- table. A paused queue (a row in queues with paused_at) gives nothing:
-- the check is a one-time filter, evaluated once before the index is read.
-- So is a queue with flow limits: claim_flow.sql claims from it. A job of a
-- sequence (sequence_key) is taken only under the queue's claim lock
-- (claim_lock.sql), as its sequence's next job (sequence_next, in
-- migrations/000010_flow_control.up.sql, says when).
-- LIMIT (SELECT $2::bigint) hides the limit from the planner, which then
-- plans to read a tenth of the rows it expects: jobs_fetch_idx in order,
-- whatever the statistics. With the limit known and statistics that
-- underestimate the backlog (analysed before a TRUNCATE and a bulk load;
-- never analysed, the index won only a tie), it planned to read every
-- available row of the queue and sort them all: LockRows sits between LIMIT
-- and Sort, so the sort is never bounded (see docs/performance.md).
-- Empty errors, tags and meta come back as NULL (jobsql.Scanner reads them
-- as empty): most jobs have none, and jsonb's output function was a fifth
-- of the row's output cost. An empty jsonb container is 4 bytes with a 1-
-- or 4-byte varlena header; any other value is more than 8.
-- The queue ($1), state (running), worker_id ($4), lease_until
-- (attempted_at plus $3) and finalized_at (null) are not returned: the
-- claimer fills them in (jobsql.ClaimFill), sparing the server their
-- output and the client a quarter of each row's bytes.
-- The children of an open gate (migrations/000018_workflow_gates.up.sql)
-- are claimed straight from blocked: gated takes up to $2 of the oldest
-- open gate's, in the same order, and the update takes the first $2 of
-- both. Rows locked and not taken stay locked until the claim commits,
-- and are passed over by other claims meanwhile. A queue with no open
-- gate reads one entry of job_gates_open_idx and takes avail as it is:
-- the CASE evaluates only the array it returns.
-- avail comes first: jobs is the first table the statement locks (see
-- poll.sql).
WITH avail AS MATERIALIZED (
    SELECT id, priority, run_at
    FROM {{schema}}.jobs
    WHERE state = 'available' AND queue = $1
      AND NOT EXISTS (SELECT 1 FROM {{schema}}.queues
                      WHERE name = $1 AND (paused_at IS NOT NULL OR max_running IS NOT NULL
                                           OR max_running_per_key IS NOT NULL OR rate_limit IS NOT NULL))
      AND (sequence_key IS NULL OR {{schema}}.sequence_next(queue, sequence_key, id))
    ORDER BY priority, run_at, id
    LIMIT (SELECT $2::bigint)
    FOR UPDATE SKIP LOCKED
), gate AS MATERIALIZED (
    SELECT g.parent_id
    FROM {{schema}}.job_gates g
    WHERE g.queue = $1 AND g.opened_at IS NOT NULL
      AND NOT EXISTS (SELECT 1 FROM {{schema}}.queues
                      WHERE name = $1 AND (paused_at IS NOT NULL OR max_running IS NOT NULL
                                           OR max_running_per_key IS NOT NULL OR rate_limit IS NOT NULL))
      -- A subplan probed per gate, not an EXISTS: pulled up into a join,
      -- that read every gated child of the queue at each claim. Ordered
      -- as jobs_gated_idx is, so that no plan scans the table instead.
      -- SKIP LOCKED: a gate whose waiting children a claim in flight
      -- holds gives this claim nothing, and the next gate is taken
      -- instead (unlocked, an older gate held by one claim starved every
      -- other of gated work). The child it locks is its gate's first
      -- free one, which gated takes (a row this transaction locked is
      -- not skipped).
      AND (SELECT c.id FROM {{schema}}.jobs c
           WHERE c.gate_id = g.parent_id AND c.queue = $1 AND c.state = 'blocked'
           ORDER BY c.priority, c.run_at, c.id LIMIT 1
           FOR UPDATE SKIP LOCKED) IS NOT NULL
    ORDER BY g.opened_at, g.parent_id
    LIMIT 1
), gated AS MATERIALIZED (
    SELECT id, priority, run_at
    FROM {{schema}}.jobs
    WHERE state = 'blocked' AND gate_id = (SELECT parent_id FROM gate) AND queue = $1
    ORDER BY priority, run_at, id
    LIMIT (SELECT $2::bigint)
    FOR UPDATE SKIP LOCKED
), drained AS (
    -- The gate goes once this claim takes its last waiting children, so
    -- that claims do not probe drained gates: when every row the claim
    -- locked is claimed (avail and gated together fit in $2) and no other
    -- child waits. One drained while two claims took its last children
    -- together is left to the maintenance sweep.
    DELETE FROM {{schema}}.job_gates g
    WHERE g.parent_id = (SELECT parent_id FROM gate) AND g.queue = $1
      -- A CASE, evaluated for the gate's row only and in this order:
      -- as separate conditions, the counts ran before the scan, at every
      -- claim, gate or none. First a child after the last one taken (one
      -- index seek: in a large fan-out, every claim but the last stops
      -- there), then any other, the rows passed over as locked among them
      -- (a walk of the index entries of the rows taken, each looked up in
      -- a hash of them: NOT IN, whose subplan PostgreSQL hashes; <> ALL
      -- of their array compared each entry with every id, 18 ms for a
      -- claim that took a gate's last 4,000 children, against 1.4 ms).
      AND CASE WHEN (SELECT c.id FROM {{schema}}.jobs c
                     WHERE c.gate_id = g.parent_id AND c.queue = $1 AND c.state = 'blocked'
                       AND (c.priority, c.run_at, c.id) > (SELECT l.priority, l.run_at, l.id FROM gated l
                                                          ORDER BY l.priority DESC, l.run_at DESC, l.id DESC
                                                          LIMIT 1)
                     ORDER BY c.priority, c.run_at, c.id LIMIT 1) IS NOT NULL THEN false
               WHEN (SELECT c.id FROM {{schema}}.jobs c
                     WHERE c.gate_id = g.parent_id AND c.queue = $1 AND c.state = 'blocked'
                       AND c.id NOT IN (SELECT id FROM gated)
                     ORDER BY c.priority, c.run_at, c.id LIMIT 1) IS NOT NULL THEN false
               ELSE (SELECT count(*) FROM (SELECT id FROM avail UNION ALL SELECT id FROM gated) l) <= $2 END
)
UPDATE {{schema}}.jobs j
SET state        = 'running',
    attempt      = j.attempt + 1,
    fence        = nextval('{{schema}}.fence_seq'),
    lease_until  = now() + $3::bigint * interval '1 microsecond',
    worker_id    = $4,
    attempted_at = now(),
    finalized_at = NULL,
    pending_parents = CASE WHEN j.state = 'blocked' THEN 0 ELSE j.pending_parents END
WHERE j.id = ANY (CASE WHEN (SELECT parent_id FROM gate) IS NULL THEN ARRAY(SELECT id FROM avail)
                       ELSE ARRAY(SELECT id FROM (SELECT id, priority, run_at FROM avail
                                                  UNION ALL
                                                  SELECT id, priority, run_at FROM gated
                                                  ORDER BY priority, run_at, id
                                                  LIMIT (SELECT $2::bigint)) m) END)
RETURNING j.id, j.kind, j.args, j.priority, j.attempt, j.max_attempts, j.run_at, j.fence,
          CASE WHEN pg_column_size(j.errors) > 8 THEN j.errors END AS errors,
          CASE WHEN cardinality(j.tags) > 0 THEN j.tags END AS tags,
          CASE WHEN pg_column_size(j.meta) > 8 THEN j.meta END AS meta,
          j.created_at, j.attempted_at, j.singleton_key, j.partition_key, j.sequence_key
