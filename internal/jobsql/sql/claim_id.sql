-- claim_id: take the one job $1, if it is scheduled or available, with a
-- new fence token and a lease of $2 microseconds for worker $3, whatever
-- its queue, its run_at or a pause: pgqueuetest.WorkJob runs one job of a
-- test at once. Its columns are claim.sql's.
UPDATE {{schema}}.jobs j
SET state        = 'running',
    attempt      = j.attempt + 1,
    fence        = nextval('{{schema}}.fence_seq'),
    lease_until  = now() + $2::bigint * interval '1 microsecond',
    worker_id    = $3,
    attempted_at = now()
WHERE j.id = $1 AND j.state IN ('scheduled', 'available')
RETURNING j.id, j.queue, j.kind, j.args, j.priority, j.state, j.attempt, j.max_attempts,
          j.run_at, j.fence, j.lease_until, j.worker_id,
          CASE WHEN pg_column_size(j.errors) > 8 THEN j.errors END AS errors,
          CASE WHEN cardinality(j.tags) > 0 THEN j.tags END AS tags,
          CASE WHEN pg_column_size(j.meta) > 8 THEN j.meta END AS meta,
          j.created_at, j.attempted_at, j.finalized_at, j.singleton_key,
          j.partition_key, j.sequence_key
