-- insert_many: a small batch of jobs in one statement, for batches too
-- small to be worth COPY. Tags come as JSON arrays (a SQL array cannot hold
-- rows of different lengths). A run_at in the future makes a job
-- scheduled.
INSERT INTO {{schema}}.jobs (queue, kind, args, priority, max_attempts, tags, meta, singleton_key,
                             partition_key, sequence_key, run_at, state)
SELECT r.queue, r.kind, r.args, r.priority, r.max_attempts,
       ARRAY(SELECT jsonb_array_elements_text(r.tags)), r.meta, r.singleton_key,
       r.partition_key, r.sequence_key,
       coalesce(r.run_at, now()),
       CASE WHEN r.run_at > now() THEN 'scheduled' ELSE 'available' END
FROM unnest($1::text[], $2::text[], $3::jsonb[], $4::smallint[], $5::int[], $6::jsonb[], $7::jsonb[], $8::text[],
            $9::text[], $10::text[], $11::timestamptz[])
     AS r(queue, kind, args, priority, max_attempts, tags, meta, singleton_key, partition_key, sequence_key, run_at)
