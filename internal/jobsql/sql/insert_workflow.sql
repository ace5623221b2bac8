-- insert_workflow: the jobs of a batch with dependencies, with the ids
-- workflow_reserve.sql gave them, and their edges, in one statement. The
-- client computed each job's state: blocked while it waits for parents,
-- cancelled (deps_cancelled) when a parent had already failed under
-- 'cancel', else scheduled or available by its run_at. $12 ids, $13
-- pending_parents (NULL for a job without parents), $14 has_children,
-- $15 cancelled, $16 the workflow; the edges are $17 parent, $18 child,
-- $19 on_failure, $20 resolved. $21 is each job's gate (the parent that
-- releases it instead of an edge, or NULL), and $22, $23 the gates'
-- parents and queues, written closed.
WITH inserted AS (
    INSERT INTO {{schema}}.jobs (id, queue, kind, args, priority, max_attempts, tags, meta, singleton_key,
                                 partition_key, sequence_key, run_at, state, finalized_at, errors,
                                 workflow_id, pending_parents, has_children, deps_cancelled, gate_id)
    OVERRIDING SYSTEM VALUE
    SELECT r.id, r.queue, r.kind, r.args, r.priority, r.max_attempts,
           ARRAY(SELECT jsonb_array_elements_text(r.tags)), r.meta, r.singleton_key,
           r.partition_key, r.sequence_key,
           coalesce(r.run_at, now()),
           CASE WHEN r.cancelled THEN 'cancelled'
                WHEN r.pending > 0 THEN 'blocked'
                WHEN r.run_at > now() THEN 'scheduled'
                ELSE 'available' END,
           CASE WHEN r.cancelled THEN now() END,
           CASE WHEN r.cancelled THEN jsonb_build_array(jsonb_build_object('attempt', 0, 'at', now(),
                    'error', 'cancelled: a job it depends on was discarded or cancelled'))
                ELSE '[]'::jsonb END,
           $16::bigint, r.pending, CASE WHEN r.has_children THEN true END, CASE WHEN r.cancelled THEN true END,
           r.gate_id
    FROM unnest($1::text[], $2::text[], $3::jsonb[], $4::smallint[], $5::int[], $6::jsonb[], $7::jsonb[], $8::text[],
                $9::text[], $10::text[], $11::timestamptz[], $12::bigint[], $13::int[], $14::boolean[], $15::boolean[],
                $21::bigint[])
         AS r(queue, kind, args, priority, max_attempts, tags, meta, singleton_key, partition_key, sequence_key, run_at,
              id, pending, has_children, cancelled, gate_id)
    RETURNING 1
), edges AS (
    INSERT INTO {{schema}}.job_deps (parent_id, child_id, on_failure, resolved)
    SELECT * FROM unnest($17::bigint[], $18::bigint[], $19::text[], $20::boolean[])
    RETURNING 1
), gates AS (
    INSERT INTO {{schema}}.job_gates (parent_id, queue)
    SELECT * FROM unnest($22::bigint[], $23::text[])
    ON CONFLICT DO NOTHING
    RETURNING 1
)
SELECT (SELECT count(*) FROM inserted), (SELECT count(*) FROM edges), (SELECT count(*) FROM gates)
