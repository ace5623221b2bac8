-- Workflows (docs/concepts/workflows.md): jobs that wait for other jobs.
-- Every new column of jobs is nullable without a default, so adding them
-- rewrites no row, and a job outside any workflow reads and writes exactly
-- as before: null in all four.
--   workflow_id      the workflow the job belongs to
--   pending_parents  how many of its dependency edges still hold it
--                    (always the count of its unresolved edges)
--   has_children     some job depends on it: only such a job's end
--                    touches job_deps (workflow_settle)
--   deps_cancelled   it was cancelled because a job it depends on was
--                    discarded or cancelled; retrying that job brings it
--                    back (workflow_resume)
ALTER TABLE {{schema}}.jobs
    ADD COLUMN workflow_id     bigint,
    ADD COLUMN pending_parents integer CHECK (pending_parents >= 0),
    ADD COLUMN has_children    boolean,
    ADD COLUMN deps_cancelled  boolean;

-- blocked: waiting for its parents. Outside jobs_fetch_idx (state =
-- 'available'), so no claim ever reads a blocked job.
ALTER TABLE {{schema}}.jobs DROP CONSTRAINT jobs_state_check;
ALTER TABLE {{schema}}.jobs ADD CONSTRAINT jobs_state_check
    CHECK (state IN ('blocked', 'scheduled', 'available', 'running', 'completed', 'discarded', 'cancelled'));

-- A workflow's jobs, for its status. Partial: jobs outside workflows
-- never enter it.
CREATE INDEX jobs_workflow_idx ON {{schema}}.jobs (workflow_id, id) WHERE workflow_id IS NOT NULL;

CREATE SEQUENCE {{schema}}.workflow_seq AS bigint;

-- job_deps: child_id waits for parent_id. on_failure says what the child
-- does when the parent ends discarded or cancelled: 'cancel' (cancelled
-- with it), 'run' (the edge no longer holds it), 'wait' (held until the
-- parent is retried and completes). resolved: the edge no longer holds
-- the child (the parent completed, failed under 'run', or was deleted);
-- an edge is resolved once, so a child's pending_parents counts down once
-- per edge whatever runs again. No foreign keys: a key's trigger would
-- cost every delete of every job; the pruner and JobDelete remove edges
-- with their jobs. fillfactor 50: an edge is written once and updated
-- once (resolved), and with room left on its page that update is HOT, so
-- it writes no index entry however the edges of a workflow lie.
CREATE TABLE {{schema}}.job_deps (
    parent_id  bigint  NOT NULL,
    child_id   bigint  NOT NULL,
    on_failure text    NOT NULL DEFAULT 'cancel' CHECK (on_failure IN ('cancel', 'run', 'wait')),
    resolved   boolean NOT NULL DEFAULT false,
    PRIMARY KEY (parent_id, child_id)
) WITH (fillfactor = 50);
CREATE INDEX job_deps_child_idx ON {{schema}}.job_deps (child_id);

-- workflow_settle applies the end of jobs ids (each in the state of the
-- same position of states: completed, discarded, cancelled, or deleted)
-- to the jobs that depend on them, and returns how many dependents it
-- changed. Called, in the same statement, by every write that ends a job
-- with has_children set, and only then: a queue without workflows never
-- calls it. Set-based: a few statements per generation of dependents,
-- their work the edges of the jobs that ended, never the workflow's size.
--   completed, deleted, or failed under 'run': the edge resolves, the
--     child's count goes down, and a child whose count reaches zero is
--     released (available, or scheduled if its run_at is ahead), its
--     queue notified at commit;
--   failed under 'cancel': the blocked child is cancelled
--     (deps_cancelled), and its own dependents settled in turn;
--   failed under 'wait': nothing; the child stays blocked.
-- plpgsql, not a CTE of the caller: each statement here takes a snapshot
-- of its own, so it sees edges an insert committed while the caller
-- waited for the parent's row lock. The sets pass between statements as
-- arrays, and every statement is planned for the arrays it gets
-- (plan_cache_mode): joined to a CTE, or under a generic plan that does
-- not know their length, the release of a fan-out's 10,000 children was
-- planned as a nested loop and took seconds.
CREATE FUNCTION {{schema}}.workflow_settle(ids bigint[], states text[]) RETURNS integer
LANGUAGE plpgsql
SET plan_cache_mode = force_custom_plan
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
CREATE FUNCTION {{schema}}.workflow_resume(ids bigint[]) RETURNS integer
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
CREATE FUNCTION {{schema}}.workflow_forget(ids bigint[]) RETURNS integer
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
