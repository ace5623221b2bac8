-- insert_unique_upsert: one unique job, when insert_unique came back empty
-- (the job holding the key was committed after its snapshot, or came back
-- into its states since). $1 to $14 are insert_unique.sql's. ON CONFLICT
-- DO UPDATE either inserts the job or locks and returns the one holding
-- the key, whenever that was committed: PostgreSQL guarantees one of the
-- two, where DO NOTHING and a read by snapshot can end with neither. The
-- update writes nothing new (the key over itself). The client runs this in
-- a savepoint and rolls it back for a duplicate, and the lock and the row
-- version go with it. The first column says whether the row is the
-- existing job: a row just inserted has no xmax; the existing job's new
-- version carries this transaction's lock in its xmax.
WITH new AS (
    SELECT coalesce($6::timestamptz, now()) AS run_at,
           {{schema}}.unique_key($12::bytea, $13::bigint, coalesce($6::timestamptz, now())) AS key
)
INSERT INTO {{schema}}.jobs AS j (queue, kind, args, priority, max_attempts, run_at, state, tags, meta,
                                  singleton_key, partition_key, sequence_key, unique_key, unique_states)
SELECT $1::text, $2::text, $3::jsonb, $4::smallint, $5::int, new.run_at,
       CASE WHEN $6::timestamptz > now() THEN 'scheduled' ELSE 'available' END,
       $7::text[], $8::jsonb, $9::text, $10::text, $11::text, new.key, $14::text[]
FROM new
ON CONFLICT (unique_key) WHERE unique_key IS NOT NULL AND state = ANY (unique_states)
DO UPDATE SET unique_key = j.unique_key
RETURNING j.xmax <> '0'::xid, j.id, j.queue, j.kind, j.args, j.priority, j.state, j.attempt, j.max_attempts,
          j.run_at, j.fence, j.lease_until, j.worker_id, j.errors, j.tags, j.meta,
          j.created_at, j.attempted_at, j.finalized_at, j.singleton_key,
          j.partition_key, j.sequence_key
