-- insert_many_unique: insert_many.sql for a batch that holds unique jobs.
-- $12 to $14 are each job's unique hash, period in microseconds and states
-- (JSON arrays), null hash for a job that is not unique. Within the batch
-- only the first job of each key is tried; a job whose key exists among
-- the jobs in its states is skipped. Returns the 1-based positions of the
-- unique jobs inserted; every job that is not unique is inserted.
WITH input AS (
    SELECT r.*, coalesce(r.run_at, now()) AS due,
           {{schema}}.unique_key(r.unique_base, r.unique_period_us, coalesce(r.run_at, now())) AS key
    FROM unnest($1::text[], $2::text[], $3::jsonb[], $4::smallint[], $5::int[], $6::jsonb[], $7::jsonb[], $8::text[],
                $9::text[], $10::text[], $11::timestamptz[], $12::bytea[], $13::bigint[], $14::jsonb[])
         WITH ORDINALITY
         AS r(queue, kind, args, priority, max_attempts, tags, meta, singleton_key, partition_key, sequence_key, run_at,
              unique_base, unique_period_us, unique_states, ord)
), first_of_key AS (
    -- Jobs that are not unique are distinct by position (8 bytes, never a
    -- 32-byte hash).
    SELECT DISTINCT ON (coalesce(key, int8send(ord))) *
    FROM input
    ORDER BY coalesce(key, int8send(ord)), ord
), ins AS (
    INSERT INTO {{schema}}.jobs (queue, kind, args, priority, max_attempts, tags, meta, singleton_key,
                                 partition_key, sequence_key, run_at, state, unique_key, unique_states)
    SELECT f.queue, f.kind, f.args, f.priority, f.max_attempts,
           ARRAY(SELECT jsonb_array_elements_text(f.tags)), f.meta, f.singleton_key,
           f.partition_key, f.sequence_key, f.due,
           CASE WHEN f.run_at > now() THEN 'scheduled' ELSE 'available' END,
           f.key, CASE WHEN f.key IS NOT NULL THEN ARRAY(SELECT jsonb_array_elements_text(f.unique_states)) END
    FROM first_of_key f
    ORDER BY f.ord
    ON CONFLICT (unique_key) WHERE unique_key IS NOT NULL AND state = ANY (unique_states) DO NOTHING
    RETURNING unique_key
)
SELECT f.ord FROM ins JOIN first_of_key f ON f.key = ins.unique_key
