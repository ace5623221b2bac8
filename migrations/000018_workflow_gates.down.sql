-- jobs first, as every client statement takes it before job_gates and
-- job_deps: dropping job_gates, then an index of jobs, deadlocked with a
-- claim that held jobs and waited for job_gates.
LOCK TABLE {{schema}}.jobs IN ACCESS EXCLUSIVE MODE;

-- The functions as 000012 wrote them (with 000014's settings), before
-- gates; then gates go.
CREATE OR REPLACE FUNCTION {{schema}}.workflow_settle(ids bigint[], states text[]) RETURNS integer
LANGUAGE plpgsql
SET plan_cache_mode = force_custom_plan
SET enable_seqscan = off
SET enable_hashjoin = off
SET enable_mergejoin = off
AS $$
DECLARE
    done_ids   bigint[];  -- ended so that their edges resolve whatever the policy
    failed_ids bigint[];  -- discarded or cancelled: the edge's policy decides
    kids       bigint[];
    counts     integer[];
    changed    integer := 0;
    touched    integer;
    queues     text[];
BEGIN
    SELECT coalesce(array_agg(p.id) FILTER (WHERE p.state IN ('completed', 'deleted')), '{}'),
           coalesce(array_agg(p.id) FILTER (WHERE p.state IN ('discarded', 'cancelled')), '{}')
    INTO done_ids, failed_ids
    FROM unnest(ids, states) AS p(id, state);
    WHILE cardinality(done_ids) > 0 OR cardinality(failed_ids) > 0 LOOP
        -- The edges that no longer hold their child, counted per child.
        WITH resolved AS (
            UPDATE {{schema}}.job_deps d
            SET resolved = true
            WHERE (d.parent_id = ANY (done_ids) OR (d.parent_id = ANY (failed_ids) AND d.on_failure = 'run'))
              AND NOT d.resolved
            RETURNING d.child_id
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
                -- clock_timestamp(), not now(): a child inserted (run_at
                -- its insert's now()) while this transaction, begun
                -- earlier, waited for the parent's row lock is due, and
                -- would otherwise wait for the scheduler. Joined by id
                -- alone: each child found through the primary
                -- key from its row of k. With id = ANY (kids) as well, the
                -- plan filtered all of kids' rows for each row of k.
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
        -- The blocked children of failed parents under 'cancel' are
        -- cancelled, and are the next generation's failed parents.
        WITH cancelled AS (
            UPDATE {{schema}}.jobs c
            SET state = 'cancelled', finalized_at = now(), deps_cancelled = true,
                errors = c.errors || jsonb_build_object('attempt', c.attempt, 'at', now(),
                    'error', 'cancelled: a job it depends on was discarded or cancelled')
            WHERE c.id = ANY (ARRAY(SELECT d.child_id FROM {{schema}}.job_deps d
                                    WHERE d.parent_id = ANY (failed_ids) AND d.on_failure = 'cancel' AND NOT d.resolved))
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

-- workflow_resume brings back, as blocked, the dependents that the
-- failure of jobs ids cancelled (deps_cancelled), and theirs in turn:
-- called by JobRetry for retried jobs with has_children, so that retrying
-- a failed parent resumes its workflow. Their counts were never lowered by
-- the failure, so each waits for exactly the parents that have not
-- completed. Returns how many it brought back.
CREATE OR REPLACE FUNCTION {{schema}}.workflow_resume(ids bigint[]) RETURNS integer
LANGUAGE plpgsql
SET plan_cache_mode = force_custom_plan
AS $$
DECLARE
    cur     bigint[] := ids;
    changed integer  := 0;
    n       integer;
BEGIN
    WHILE cardinality(cur) > 0 LOOP
        WITH revived AS (
            UPDATE {{schema}}.jobs c
            SET state = 'blocked', finalized_at = NULL, deps_cancelled = NULL
            WHERE c.id = ANY (ARRAY(SELECT d.child_id FROM {{schema}}.job_deps d
                                    WHERE d.parent_id = ANY (cur) AND NOT d.resolved))
              AND c.state = 'cancelled' AND c.deps_cancelled AND c.pending_parents > 0
            RETURNING c.id, c.has_children
        )
        SELECT count(*), coalesce(array_agg(id) FILTER (WHERE has_children), '{}')
        INTO n, cur
        FROM revived;
        changed := changed + n;
    END LOOP;
    RETURN changed;
END
$$;

-- workflow_forget is told of jobs ids deleted (by JobDelete or the
-- pruner): the jobs that waited for them no longer do (their edges settle
-- as 'deleted'), and every edge from or to them is removed, so nothing
-- dangles. Called only for deleted jobs that had edges (has_children or
-- a workflow_id). A function for the same reason as workflow_settle, and
-- because a data-modifying CTE of the caller could not delete an edge
-- the settling had just updated in the same statement.
CREATE OR REPLACE FUNCTION {{schema}}.workflow_forget(ids bigint[]) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    n integer;
BEGIN
    PERFORM {{schema}}.workflow_settle(ids, array_fill('deleted'::text, ARRAY[cardinality(ids)]));
    DELETE FROM {{schema}}.job_deps WHERE parent_id = ANY (ids);
    GET DIAGNOSTICS n = ROW_COUNT;
    DELETE FROM {{schema}}.job_deps WHERE child_id = ANY (ids);
    RETURN n;
END
$$;

-- Gated children go back to edges: released when their gate is open (or
-- gone), an edge into a closed gate otherwise.
INSERT INTO {{schema}}.job_deps (parent_id, child_id, on_failure, resolved)
SELECT c.gate_id, c.id, 'cancel', c.pending_parents = 0
FROM {{schema}}.jobs c
JOIN {{schema}}.job_gates g ON g.parent_id = c.gate_id AND g.queue = c.queue AND g.opened_at IS NULL
WHERE c.gate_id IS NOT NULL
ON CONFLICT DO NOTHING;
UPDATE {{schema}}.jobs c
SET pending_parents = 0, state = 'available'
WHERE c.gate_id IS NOT NULL AND c.state = 'blocked'
  AND NOT EXISTS (SELECT 1 FROM {{schema}}.job_gates g
                  WHERE g.parent_id = c.gate_id AND g.queue = c.queue AND g.opened_at IS NULL);
DROP VIEW {{schema}}.job_edges;
DROP VIEW {{schema}}.job_gate_edges;
DROP FUNCTION {{schema}}.job_state(text, bigint, text);
DROP FUNCTION {{schema}}.gate_closed(bigint, text);
DROP TABLE {{schema}}.job_gates;
DROP INDEX {{schema}}.jobs_gated_idx;
DROP INDEX {{schema}}.jobs_blocked_idx;
CREATE INDEX jobs_blocked_idx ON {{schema}}.jobs (queue) WHERE state = 'blocked';
ALTER TABLE {{schema}}.jobs DROP COLUMN gate_id;
