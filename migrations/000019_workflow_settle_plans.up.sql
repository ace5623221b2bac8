-- workflow_settle as in 000018, planned once per connection instead of at
-- every call (plan_cache_mode = force_generic_plan).
-- Planned for each call's arrays (force_custom_plan, since 000012), an
-- = ANY over the constant array of a batch's parents had its selectivity
-- estimated element by element, for each index path the planner weighed:
-- in a layered run the edge update took longer to plan (2.2-2.6 ms per
-- batch of about 240 parents) than to run, and a chain's step spent 0.3
-- ms planning the function's statements, a third of the settle's time.
-- Custom plans were first chosen because a generic plan, not knowing an
-- array's length, could join a batch's 10,000 children by a nested loop
-- over a rescanned set; since 000014 the function allows neither
-- sequential scans nor hash or merge joins, so every plan, generic or
-- custom, is the same: the batch's arrays walked once, one probe per
-- element into a primary key or jobs_gated_idx.
-- The edges of completed parents and those of failed ones under 'run' are
-- resolved by two updates rather than one with an OR: an array that is a
-- parameter is searched element by element when it is in a filter, as it
-- was in the OR's recheck, for every edge.
-- The gated children of limited queues' opened gates and of deleted
-- parents are released by one statement, no longer two alike.
CREATE OR REPLACE FUNCTION {{schema}}.workflow_settle(ids bigint[], states text[]) RETURNS integer
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
SET enable_hashjoin = off
SET enable_mergejoin = off
AS $$
DECLARE
    done_ids      bigint[];  -- ended so that their edges resolve whatever the policy
    failed_ids    bigint[];  -- discarded or cancelled: the edge's policy decides
    completed_ids bigint[];  -- completed: their gates open
    deleted_ids   bigint[];  -- deleted: their gated children are released
    kids          bigint[];
    counts        integer[];
    changed       integer := 0;
    touched       integer;
    queues        text[];
    gate_parents  bigint[] := '{}';
    gate_queues   text[] := '{}';
BEGIN
    SELECT coalesce(array_agg(p.id) FILTER (WHERE p.state IN ('completed', 'deleted')), '{}'),
           coalesce(array_agg(p.id) FILTER (WHERE p.state IN ('discarded', 'cancelled')), '{}'),
           coalesce(array_agg(p.id) FILTER (WHERE p.state = 'completed'), '{}'),
           coalesce(array_agg(p.id) FILTER (WHERE p.state = 'deleted'), '{}')
    INTO done_ids, failed_ids, completed_ids, deleted_ids
    FROM unnest(ids, states) AS p(id, state);

    IF cardinality(completed_ids) > 0 THEN
        WITH opened AS (
            UPDATE {{schema}}.job_gates g
            SET opened_at = now()
            WHERE g.parent_id = ANY (completed_ids) AND g.opened_at IS NULL
            RETURNING g.parent_id, g.queue
        )
        SELECT coalesce(array_agg(o.parent_id) FILTER (WHERE q.limited), '{}'),
               coalesce(array_agg(o.queue) FILTER (WHERE q.limited), '{}'),
               array_agg(DISTINCT o.queue) FILTER (WHERE q.limited IS NOT TRUE),
               count(*) FILTER (WHERE q.limited IS NOT TRUE)
        INTO gate_parents, gate_queues, queues, touched
        FROM opened o
        LEFT JOIN LATERAL (
            SELECT (x.max_running IS NOT NULL OR x.max_running_per_key IS NOT NULL
                    OR x.rate_limit IS NOT NULL) AS limited
            FROM {{schema}}.queues x WHERE x.name = o.queue
        ) q ON true;
        -- An opened gate counts as one dependent changed (the caller
        -- wakes its producers when any was): its children are not counted.
        changed := changed + touched;
        PERFORM pg_notify('{{channel}}', q) FROM unnest(queues) AS q;
    END IF;

    -- Gated children written released, as edges release theirs: those of
    -- an opened gate in a queue with flow limits (claimed by
    -- claim_flow.sql, which does not read gates), and every blocked one
    -- of a deleted parent (its gates go with it, workflow_forget).
    IF cardinality(gate_parents) > 0 OR cardinality(deleted_ids) > 0 THEN
        WITH released AS (
            UPDATE {{schema}}.jobs c
            SET pending_parents = 0,
                state = CASE WHEN c.run_at > clock_timestamp() THEN 'scheduled' ELSE 'available' END
            FROM (SELECT parent_id, queue FROM unnest(gate_parents, gate_queues) AS g(parent_id, queue)
                  UNION ALL
                  SELECT id, NULL FROM unnest(deleted_ids) AS id) AS g(parent_id, queue)
            WHERE c.gate_id = g.parent_id AND (g.queue IS NULL OR c.queue = g.queue) AND c.state = 'blocked'
            RETURNING c.queue, c.state
        )
        SELECT count(*), array_agg(DISTINCT queue) FILTER (WHERE state = 'available')
        INTO touched, queues
        FROM released;
        changed := changed + touched;
        PERFORM pg_notify('{{channel}}', q) FROM unnest(queues) AS q;
    END IF;

    WHILE cardinality(done_ids) > 0 OR cardinality(failed_ids) > 0 LOOP
        -- The edges that no longer hold their child, counted per child.
        -- Two updates, not one with an OR: each array is then only an
        -- index condition; in the OR's recheck an array parameter was
        -- searched element by element for every edge.
        WITH resolved_done AS (
            UPDATE {{schema}}.job_deps d
            SET resolved = true
            WHERE d.parent_id = ANY (done_ids)
              AND NOT d.resolved
            RETURNING d.child_id
        ), resolved_failed AS (
            UPDATE {{schema}}.job_deps d
            SET resolved = true
            -- A one-time test: no edge is read when no parent failed.
            WHERE cardinality(failed_ids) > 0
              AND d.parent_id = ANY (failed_ids) AND d.on_failure = 'run'
              AND NOT d.resolved
            RETURNING d.child_id
        ), resolved AS (
            SELECT child_id FROM resolved_done
            UNION ALL
            SELECT child_id FROM resolved_failed
        )
        -- In id order: the children are then updated in the order they
        -- lie in the table and its indexes.
        SELECT coalesce(array_agg(g.child_id ORDER BY g.child_id), '{}'), coalesce(array_agg(g.n ORDER BY g.child_id), '{}')
        INTO kids, counts
        FROM (SELECT child_id, count(*)::integer AS n FROM resolved GROUP BY child_id) g;
        IF cardinality(kids) > 0 THEN
            WITH released AS (
                UPDATE {{schema}}.jobs c
                SET pending_parents = c.pending_parents - k.n,
                    state = CASE WHEN c.state <> 'blocked' OR c.pending_parents > k.n THEN c.state
                                 WHEN c.run_at > clock_timestamp() THEN 'scheduled'
                                 ELSE 'available' END
                FROM unnest(kids, counts) AS k(id, n)
                -- clock_timestamp(), not now(): see 000012.
                WHERE c.id = k.id
                RETURNING c.queue, c.state
            )
            SELECT count(*) FILTER (WHERE state IN ('available', 'scheduled')),
                   array_agg(DISTINCT queue) FILTER (WHERE state = 'available')
            INTO touched, queues
            FROM released;
            changed := changed + touched;
            PERFORM pg_notify('{{channel}}', q) FROM unnest(queues) AS q;
        END IF;

        EXIT WHEN cardinality(failed_ids) = 0;
        -- The blocked children of failed parents under 'cancel' (edges,
        -- and gates not yet opened) are cancelled, and are the next
        -- generation's failed parents.
        WITH cancelled AS (
            UPDATE {{schema}}.jobs c
            SET state = 'cancelled', finalized_at = now(), deps_cancelled = true,
                errors = c.errors || jsonb_build_object('attempt', c.attempt, 'at', now(),
                    'error', 'cancelled: a job it depends on was discarded or cancelled')
            WHERE c.id = ANY (ARRAY(SELECT d.child_id FROM {{schema}}.job_deps d
                                    WHERE d.parent_id = ANY (failed_ids) AND d.on_failure = 'cancel' AND NOT d.resolved
                                    UNION ALL
                                    SELECT k.id FROM {{schema}}.job_gates g
                                    JOIN {{schema}}.jobs k ON k.gate_id = g.parent_id AND k.queue = g.queue
                                    WHERE g.parent_id = ANY (failed_ids) AND g.opened_at IS NULL
                                      AND k.state = 'blocked'))
              AND c.state = 'blocked'
            RETURNING c.id, c.has_children
        )
        SELECT count(*), coalesce(array_agg(id) FILTER (WHERE has_children), '{}')
        INTO touched, failed_ids
        FROM cancelled;
        changed := changed + touched;
        done_ids := '{}';
    END LOOP;
    RETURN changed;
END
$$;
