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
-- calls it. Set-based: one statement per generation of dependents, its
-- cost the edges of the jobs that ended, never the workflow's size.
--   completed, deleted, or failed under 'run': the edge resolves, the
--     child's count goes down, and a child whose count reaches zero is
--     released (available, or scheduled if its run_at is ahead), its
--     queue notified at commit;
--   failed under 'cancel': the blocked child is cancelled
--     (deps_cancelled), and its own dependents settled in turn;
--   failed under 'wait': nothing; the child stays blocked.
-- plpgsql, not a CTE of the caller: each statement here takes a snapshot
-- of its own, so it sees edges an insert committed while the caller
-- waited for the parent's row lock.
CREATE FUNCTION {{schema}}.workflow_settle(ids bigint[], states text[]) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    ended_ids    bigint[] := ids;
    ended_states text[]   := states;
    changed      integer  := 0;
    n            integer;
    queues       text[];
BEGIN
    WHILE cardinality(ended_ids) > 0 LOOP
        WITH p AS (
            SELECT * FROM unnest(ended_ids, ended_states) AS p(id, state)
        ), resolved AS (
            UPDATE {{schema}}.job_deps d
            SET resolved = true
            FROM p
            WHERE d.parent_id = ANY (ended_ids) AND d.parent_id = p.id AND NOT d.resolved
              AND (p.state IN ('completed', 'deleted')
                   OR (p.state IN ('discarded', 'cancelled') AND d.on_failure = 'run'))
            RETURNING d.child_id
        ), counts AS (
            SELECT child_id, count(*)::integer AS n FROM resolved GROUP BY child_id
        ), released AS (
            UPDATE {{schema}}.jobs c
            SET pending_parents = c.pending_parents - k.n,
                state = CASE WHEN c.state <> 'blocked' OR c.pending_parents > k.n THEN c.state
                             WHEN c.run_at > now() THEN 'scheduled'
                             ELSE 'available' END
            FROM counts k
            WHERE c.id = ANY (ARRAY(SELECT child_id FROM counts)) AND c.id = k.child_id
            RETURNING c.queue, c.state
        )
        SELECT count(*) FILTER (WHERE state IN ('available', 'scheduled')),
               array_agg(DISTINCT queue) FILTER (WHERE state = 'available')
        INTO n, queues
        FROM released;
        changed := changed + n;
        PERFORM pg_notify('{{channel}}', q) FROM unnest(queues) AS q;

        EXIT WHEN NOT ended_states && ARRAY['discarded', 'cancelled'];
        WITH p AS (
            SELECT * FROM unnest(ended_ids, ended_states) AS p(id, state)
        ), doomed AS (
            SELECT d.child_id
            FROM {{schema}}.job_deps d JOIN p ON d.parent_id = p.id
            WHERE d.parent_id = ANY (ended_ids) AND p.state IN ('discarded', 'cancelled')
              AND d.on_failure = 'cancel' AND NOT d.resolved
        ), cancelled AS (
            UPDATE {{schema}}.jobs c
            SET state = 'cancelled', finalized_at = now(), deps_cancelled = true,
                errors = c.errors || jsonb_build_object('attempt', c.attempt, 'at', now(),
                    'error', 'cancelled: a job it depends on was discarded or cancelled')
            WHERE c.id = ANY (ARRAY(SELECT child_id FROM doomed)) AND c.state = 'blocked'
            RETURNING c.id, c.has_children
        )
        SELECT count(*), coalesce(array_agg(id) FILTER (WHERE has_children), '{}')
        INTO n, ended_ids
        FROM cancelled;
        changed := changed + n;
        ended_states := array_fill('cancelled'::text, ARRAY[cardinality(ended_ids)]);
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
LANGUAGE plpgsql AS $$
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
