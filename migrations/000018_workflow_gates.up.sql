-- Gates: a job with exactly one parent is released by its parent's
-- completion without being written. The parent's completion opens the
-- gate (one row of job_gates per parent and queue of its gated children);
-- claim.sql then takes the gate's children straight from blocked to
-- running, so a fan-out of 10,000 children costs each child one write
-- (its claim) instead of two (release, claim), and its root's completion
-- writes one gate row per queue instead of 10,000 children and edges.
--   gate_id  the one parent whose completion releases the job; such a
--            job has no row in job_deps (its gate is its edge, with
--            on_failure 'cancel'), and pending_parents 1 while it waits
--            (0 once claimed or released the edge way).
-- Null for every other job, which reads and writes as before.
ALTER TABLE {{schema}}.jobs ADD COLUMN gate_id bigint;

-- A gate's waiting children in claim order. Claims and releases write a
-- row version that is not blocked, so only inserts (and retries back to
-- blocked) add entries.
CREATE INDEX jobs_gated_idx ON {{schema}}.jobs (gate_id, queue, priority, run_at, id)
    WHERE state = 'blocked' AND gate_id IS NOT NULL;

-- jobs_blocked_idx (migration 17) without the gated children: a query
-- for a gate's children (gate_id = ...) can then only use jobs_gated_idx.
-- With both, the planner chose jobs_blocked_idx for the claim's gate
-- branch whenever the statistics said few jobs were blocked, and would
-- then read every blocked job of the queue. QueueList counts the gated
-- ones through job_gates and jobs_gated_idx.
DROP INDEX {{schema}}.jobs_blocked_idx;
CREATE INDEX jobs_blocked_idx ON {{schema}}.jobs (queue) WHERE state = 'blocked' AND gate_id IS NULL;

-- job_gates: parent_id's gate for its gated children in queue. Written
-- closed (opened_at null) with the children, opened by the parent's
-- fenced completion (workflow_settle), deleted by the maintenance sweep
-- once no child waits behind it, or with its parent. A child whose gate
-- row is gone waits for nothing (job_retry.sql).
CREATE TABLE {{schema}}.job_gates (
    parent_id bigint      NOT NULL,
    queue     text        NOT NULL,
    opened_at timestamptz,
    PRIMARY KEY (parent_id, queue)
);
CREATE INDEX job_gates_open_idx ON {{schema}}.job_gates (queue, opened_at, parent_id)
    WHERE opened_at IS NOT NULL;

-- gate_closed: whether parent_id's gate for queue still holds its
-- children (a row, not opened). Gone or opened, it holds nothing: a
-- retried child of either is available at once (job_retry.sql).
CREATE FUNCTION {{schema}}.gate_closed(parent_id bigint, queue text) RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT EXISTS (SELECT 1 FROM {{schema}}.job_gates g
                   WHERE g.parent_id = gate_closed.parent_id AND g.queue = gate_closed.queue
                     AND g.opened_at IS NULL)
$$;

-- job_state: the state a job is shown in. A child of a gate that no
-- longer holds it is blocked in its row until a claim takes it, but
-- claimable: it reads as available (JobGet, JobList, workflows, the
-- dashboard). Every other job reads as its row says.
CREATE FUNCTION {{schema}}.job_state(state text, gate_id bigint, queue text) RETURNS text
LANGUAGE sql STABLE AS $$
    SELECT CASE WHEN state = 'blocked' AND gate_id IS NOT NULL AND NOT {{schema}}.gate_closed(gate_id, queue)
                THEN 'available' ELSE state END
$$;

-- job_gate_edges: each gated child's gate as the edge it stands for, in
-- job_deps' columns (with the child's workflow), for the readers of edges:
-- resolved once the gate no longer holds the child. A gate edge goes with
-- its parent, as an edge of job_deps does: the parent is probed by its
-- primary key, once per child. Joined instead, with statistics from
-- before the parent was inserted, the planner merge-joined the child with
-- the primary key, read from its start up to the parent. Found by child
-- (the primary key) or by workflow (jobs_workflow_idx); no index leads
-- from a parent to its gated children in every state.
CREATE VIEW {{schema}}.job_gate_edges AS
SELECT c.gate_id AS parent_id, c.id AS child_id, 'cancel'::text AS on_failure,
       NOT {{schema}}.gate_closed(c.gate_id, c.queue) AS resolved, c.workflow_id
FROM {{schema}}.jobs c
WHERE c.gate_id IS NOT NULL
  AND (SELECT true FROM {{schema}}.jobs p WHERE p.id = c.gate_id);

-- job_edges: every dependency edge, job_deps' and the gates'.
CREATE VIEW {{schema}}.job_edges AS
SELECT parent_id, child_id, on_failure, resolved FROM {{schema}}.job_deps
UNION ALL
SELECT parent_id, child_id, on_failure, resolved FROM {{schema}}.job_gate_edges;

-- workflow_settle, as in 000012 and 000014, with gates:
--   completed: the parent's closed gates open; gated children in a
--     queue with flow limits (claimed by claim_flow.sql, which reads no
--     gate) are released the edge way at once, the others stay unwritten
--     and their queues are notified;
--   deleted: the gated children still blocked are released (their gate
--     goes with the parent, workflow_forget);
--   discarded or cancelled: the blocked children of a gate still closed
--     are cancelled, as an edge under 'cancel'.
-- A gate opens once: only a closed one is opened, so a parent that
-- completes again after a retry opens nothing.
CREATE OR REPLACE FUNCTION {{schema}}.workflow_settle(ids bigint[], states text[]) RETURNS integer
LANGUAGE plpgsql
SET plan_cache_mode = force_custom_plan
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
    gate_parents  bigint[];
    gate_queues   text[];
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
        -- A queue with flow limits is claimed by claim_flow.sql, which
        -- does not read gates: its children are released as edges are.
        IF cardinality(gate_parents) > 0 THEN
            WITH released AS (
                UPDATE {{schema}}.jobs c
                SET pending_parents = 0,
                    state = CASE WHEN c.run_at > clock_timestamp() THEN 'scheduled' ELSE 'available' END
                FROM unnest(gate_parents, gate_queues) AS g(parent_id, queue)
                WHERE c.gate_id = g.parent_id AND c.queue = g.queue AND c.state = 'blocked'
                RETURNING c.queue, c.state
            )
            SELECT count(*), array_agg(DISTINCT queue) FILTER (WHERE state = 'available')
            INTO touched, queues
            FROM released;
            changed := changed + touched;
            PERFORM pg_notify('{{channel}}', q) FROM unnest(queues) AS q;
        END IF;
    END IF;

    IF cardinality(deleted_ids) > 0 THEN
        WITH released AS (
            UPDATE {{schema}}.jobs c
            SET pending_parents = 0,
                state = CASE WHEN c.run_at > clock_timestamp() THEN 'scheduled' ELSE 'available' END
            WHERE c.gate_id = ANY (deleted_ids) AND c.state = 'blocked'
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

-- workflow_resume, as in 000012, with the gated children the failure
-- cancelled: found among the workflow's jobs (no index leads from a gate
-- to its finished children; a resume is an operator's retry, not a
-- completion's work).
CREATE OR REPLACE FUNCTION {{schema}}.workflow_resume(ids bigint[]) RETURNS integer
LANGUAGE plpgsql
SET plan_cache_mode = force_custom_plan
AS $$
DECLARE
    cur     bigint[] := ids;
    changed integer  := 0;
    n       integer;
    wfs     bigint[];
BEGIN
    WHILE cardinality(cur) > 0 LOOP
        SELECT coalesce(array_agg(DISTINCT p.workflow_id), '{}') INTO wfs
        FROM {{schema}}.jobs p WHERE p.id = ANY (cur) AND p.workflow_id IS NOT NULL;
        WITH revived AS (
            UPDATE {{schema}}.jobs c
            SET state = 'blocked', finalized_at = NULL, deps_cancelled = NULL
            WHERE (c.id = ANY (ARRAY(SELECT d.child_id FROM {{schema}}.job_deps d
                                     WHERE d.parent_id = ANY (cur) AND NOT d.resolved))
                   OR (c.workflow_id = ANY (wfs) AND c.gate_id = ANY (cur)))
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

-- workflow_forget, as in 000012, removing the deleted parents' gates too.
CREATE OR REPLACE FUNCTION {{schema}}.workflow_forget(ids bigint[]) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    n integer;
BEGIN
    PERFORM {{schema}}.workflow_settle(ids, array_fill('deleted'::text, ARRAY[cardinality(ids)]));
    DELETE FROM {{schema}}.job_deps WHERE parent_id = ANY (ids);
    GET DIAGNOSTICS n = ROW_COUNT;
    DELETE FROM {{schema}}.job_deps WHERE child_id = ANY (ids);
    DELETE FROM {{schema}}.job_gates WHERE parent_id = ANY (ids);
    RETURN n;
END
$$;
