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
WITH picked AS (
    SELECT id
    FROM {{schema}}.jobs
    WHERE state = 'available' AND queue = $1
      AND NOT EXISTS (SELECT 1 FROM {{schema}}.queues
                      WHERE name = $1 AND (paused_at IS NOT NULL OR max_running IS NOT NULL
                                           OR max_running_per_key IS NOT NULL OR rate_limit IS NOT NULL))
      AND (sequence_key IS NULL OR {{schema}}.sequence_next(queue, sequence_key, id))
    ORDER BY priority, run_at, id
    LIMIT (SELECT $2::bigint)
    FOR UPDATE SKIP LOCKED
)
UPDATE {{schema}}.jobs j
SET state        = 'running',
    attempt      = j.attempt + 1,
    fence        = nextval('{{schema}}.fence_seq'),
    lease_until  = now() + $3::bigint * interval '1 microsecond',
    worker_id    = $4,
    attempted_at = now(),
    finalized_at = NULL
WHERE j.id = ANY (ARRAY(SELECT id FROM picked))
RETURNING j.id, j.kind, j.args, j.priority, j.attempt, j.max_attempts, j.run_at, j.fence,
          CASE WHEN pg_column_size(j.errors) > 8 THEN j.errors END AS errors,
          CASE WHEN cardinality(j.tags) > 0 THEN j.tags END AS tags,
          CASE WHEN pg_column_size(j.meta) > 8 THEN j.meta END AS meta,
          j.created_at, j.attempted_at, j.singleton_key, j.partition_key, j.sequence_key
