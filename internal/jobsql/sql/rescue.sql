-- rescue: put back jobs whose lease expired, but only those still as
-- rescue_candidates read them (same fence, still running, still expired), so
-- a completion that landed in between is never overwritten. Rows another
-- transaction has locked are skipped, not waited for: a holder frozen
-- between its CompleteTx and its COMMIT must not stall every rescue; its
-- own commit or abort settles that job, and the next round sees it again.
-- A rescued job gets a new fence at once: whatever its old holder writes
-- later is refused. A job JobCancel asked to cancel ends cancelled, its
-- holder gone before it could. Each rescued job is returned, with the
-- client whose lease expired (worker_id is left as it was), for the log.
WITH r AS (
    SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::bigint[]) AS r(id, fence, delay)
), free AS (
    SELECT j.id
    FROM {{schema}}.jobs j
    WHERE j.id = ANY ($1::bigint[]) AND j.state = 'running' AND j.lease_until < now()
    FOR UPDATE SKIP LOCKED
), rescued AS (
UPDATE {{schema}}.jobs j
SET errors = j.errors || jsonb_build_object('attempt', j.attempt, 'at', now(),
        'error', 'lease expired (worker ' || coalesce(j.worker_id, '?') || ')'
                 || CASE WHEN j.cancel_requested_at IS NOT NULL THEN '; cancelled as requested' ELSE '' END),
    state = CASE WHEN j.cancel_requested_at IS NOT NULL THEN 'cancelled'
                 WHEN j.attempt >= j.max_attempts THEN 'discarded' ELSE 'scheduled' END,
    run_at = CASE WHEN j.cancel_requested_at IS NOT NULL OR j.attempt >= j.max_attempts THEN j.run_at
                  ELSE now() + greatest(r.delay, 0) * interval '1 microsecond' END,
    finalized_at = CASE WHEN j.cancel_requested_at IS NOT NULL OR j.attempt >= j.max_attempts THEN now() END,
    fence = nextval('{{schema}}.fence_seq'),
    lease_until = NULL
FROM r
WHERE j.id = ANY (ARRAY(SELECT id FROM free)) AND j.id = r.id AND j.fence = r.fence
  AND j.state = 'running' AND j.lease_until < now()
RETURNING j.id, j.queue, j.kind, coalesce(j.worker_id, '') AS worker_id, j.state, j.has_children
), settled AS (
    -- A job ended here (discarded, or cancelled as requested) that some
    -- job depends on settles its dependents by their policy (see
    -- finish.sql). A rescued job put back to run releases nothing.
    SELECT {{schema}}.workflow_settle(array_agg(id), array_agg(state))
    FROM rescued WHERE has_children AND state IN ('discarded', 'cancelled') HAVING count(*) > 0
)
SELECT id, queue, kind, worker_id, state FROM rescued WHERE (SELECT count(*) FROM settled) >= 0
