-- insert_unique: one unique job. $1 to $11 are insert.sql's; $12 is the hash
-- of what the job is unique by, $13 its period in microseconds (0: none),
-- $14 the states in which an existing job counts as a duplicate. The first
-- column says whether the row is the job inserted (false) or the existing
-- duplicate (true). No row at all means the conflicting job was committed
-- after this statement's snapshot was taken, or left its states since:
-- run the statement again.
WITH new AS (
    SELECT coalesce($6::timestamptz, now()) AS run_at,
           {{schema}}.unique_key($12::bytea, $13::bigint, coalesce($6::timestamptz, now())) AS key
), ins AS (
    INSERT INTO {{schema}}.jobs AS j (queue, kind, args, priority, max_attempts, run_at, state, tags, meta,
                                      singleton_key, partition_key, sequence_key, unique_key, unique_states)
    SELECT $1::text, $2::text, $3::jsonb, $4::smallint, $5::int, new.run_at,
           CASE WHEN $6::timestamptz > now() THEN 'scheduled' ELSE 'available' END,
           $7::text[], $8::jsonb, $9::text, $10::text, $11::text, new.key, $14::text[]
    FROM new
    ON CONFLICT (unique_key) WHERE unique_key IS NOT NULL AND state = ANY (unique_states) DO NOTHING
    RETURNING j.id, j.queue, j.kind, j.args, j.priority, j.state, j.attempt, j.max_attempts,
              j.run_at, j.fence, j.lease_until, j.worker_id, j.errors, j.tags, j.meta,
              j.created_at, j.attempted_at, j.finalized_at, j.singleton_key,
              j.partition_key, j.sequence_key
)
SELECT false, * FROM ins
UNION ALL
SELECT true, j.id, j.queue, j.kind, j.args, j.priority, j.state, j.attempt, j.max_attempts,
       j.run_at, j.fence, j.lease_until, j.worker_id, j.errors, j.tags, j.meta,
       j.created_at, j.attempted_at, j.finalized_at, j.singleton_key,
       j.partition_key, j.sequence_key
FROM {{schema}}.jobs j, new
WHERE NOT EXISTS (SELECT FROM ins) AND j.unique_key = new.key AND j.state = ANY (j.unique_states)
