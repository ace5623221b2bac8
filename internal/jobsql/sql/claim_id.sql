-- claim_id: take the one job $1, if it is scheduled or available (or
-- blocked behind a gate that no longer holds it), with a
-- new fence token and a lease of $2 microseconds for worker $3, whatever
-- its queue, its run_at or a pause: pgqueuetest.WorkJob runs one job of a
-- test at once. Its columns are claim.sql's.
UPDATE {{schema}}.jobs j
SET state        = 'running',
    attempt      = j.attempt + 1,
    fence        = nextval('{{schema}}.fence_seq'),
    lease_until  = now() + $2::bigint * interval '1 microsecond',
    worker_id    = $3,
    attempted_at = now(),
    pending_parents = CASE WHEN j.state = 'blocked' THEN 0 ELSE j.pending_parents END
WHERE j.id = $1
  AND (j.state IN ('scheduled', 'available')
       OR (j.state = 'blocked' AND j.gate_id IS NOT NULL AND NOT {{schema}}.gate_closed(j.gate_id, j.queue)))
RETURNING j.id, j.queue, j.kind, j.args, j.priority, j.state, j.attempt, j.max_attempts,
          j.run_at, j.fence, j.lease_until, j.worker_id,
          CASE WHEN pg_column_size(j.errors) > 8 THEN j.errors END AS errors,
          CASE WHEN cardinality(j.tags) > 0 THEN j.tags END AS tags,
          CASE WHEN pg_column_size(j.meta) > 8 THEN j.meta END AS meta,
          j.created_at, j.attempted_at, j.finalized_at, j.singleton_key,
          j.partition_key, j.sequence_key
