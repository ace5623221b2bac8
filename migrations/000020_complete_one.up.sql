-- complete_one: the completion of one job (job_id, under job_fence), as
-- complete_many.sql writes a batch, with the same rows back: a row with a
-- null id carrying the count of dependents workflow_settle changed (null
-- when the job has none), then the id if the fenced update refused it.
-- The completer sends a batch of one completion (a quiet queue's, a
-- chain's step) here (sql/complete_one.sql) rather than through
-- complete_many.sql, whose arrays are planned at every call: that
-- planning was most of such a batch's cost on the server. PL/pgSQL keeps
-- the update's plan for the session, and plans it with sequential scans
-- off: a plan kept from a moment the table was a few pages long would
-- otherwise read the whole table (see claim_settings.sql), where the
-- primary key finds the row. The state is tested inside a CASE, as in
-- complete_many.sql, so that no plan reads jobs_running_idx.
CREATE FUNCTION {{schema}}.complete_one(job_id bigint, job_fence bigint)
RETURNS TABLE (id bigint, settled integer)
LANGUAGE plpgsql
SET enable_seqscan = off
AS $$
DECLARE
    kids boolean;
BEGIN
    UPDATE {{schema}}.jobs j
    SET state = 'completed', finalized_at = now(), lease_until = NULL
    WHERE j.id = job_id AND j.fence = job_fence AND CASE WHEN j.state = 'running' THEN true END
    RETURNING j.has_children INTO kids;
    id := NULL;
    IF NOT FOUND THEN
        -- Refused: a stale fence, a job no longer running, or gone.
        settled := NULL;
        RETURN NEXT;
        id := job_id;
        RETURN NEXT;
        RETURN;
    END IF;
    -- Only the job this fenced update completed settles its dependents.
    settled := CASE WHEN kids THEN {{schema}}.workflow_settle(ARRAY[job_id], ARRAY['completed']) END;
    RETURN NEXT;
END
$$;
