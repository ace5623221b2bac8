-- finish: record the results of many running jobs in one statement. Each
-- position of the arrays is one job:
--   $1 id, $2 fence        the claim the result belongs to
--   $3 op                  complete | fail | cancel | snooze | release
--                          | discard | unknown_kind
--   $4 error, $5 trace     kept in errors when error is not null
--   $6 delay               microseconds before the next run (fail, snooze)
-- Only rows still running under the given fence change; the ids returned
-- are those that did not (see the end), which had lost their claim.
-- fail discards the job once its attempts are used up; snooze and release
-- give the attempt back. A job JobCancel asked to cancel
-- (cancel_requested_at) ends cancelled whatever the op, except complete:
-- work that was done stays completed. discard ends the job discarded
-- whatever attempts it has left (an ErrorHandler's decision, or an unknown
-- kind's last try); unknown_kind is a snooze whose entry in errors is
-- marked, so the tries of a kind no worker knows are counted in the row.
WITH r AS (
    SELECT *
    FROM unnest($1::bigint[], $2::bigint[], $3::text[], $4::text[], $5::text[], $6::bigint[])
         AS r(id, fence, op, error, trace, delay)
), done AS (
UPDATE {{schema}}.jobs j
SET state = CASE
        WHEN r.op = 'complete' THEN 'completed'
        WHEN r.op = 'cancel' OR j.cancel_requested_at IS NOT NULL THEN 'cancelled'
        WHEN r.op = 'discard' OR (r.op = 'fail' AND j.attempt >= j.max_attempts) THEN 'discarded'
        WHEN r.op = 'release' OR r.delay <= 0 THEN 'available'
        ELSE 'scheduled' END,
    attempt = CASE WHEN r.op IN ('snooze', 'release', 'unknown_kind') AND j.cancel_requested_at IS NULL THEN j.attempt - 1
                   ELSE j.attempt END,
    errors = CASE WHEN r.error IS NULL THEN j.errors
                  ELSE j.errors || jsonb_strip_nulls(jsonb_build_object(
                      'attempt', j.attempt, 'at', now(), 'error', r.error, 'trace', r.trace,
                      'unknown_kind', CASE WHEN r.op = 'unknown_kind' THEN true END)) END,
    run_at = CASE WHEN j.cancel_requested_at IS NOT NULL AND r.op <> 'complete' THEN j.run_at
                  WHEN r.op IN ('snooze', 'unknown_kind') OR (r.op = 'fail' AND j.attempt < j.max_attempts)
                  THEN now() + greatest(r.delay, 0) * interval '1 microsecond'
                  ELSE j.run_at END,
    finalized_at = CASE WHEN r.op IN ('complete', 'cancel', 'discard') OR j.cancel_requested_at IS NOT NULL
                             OR (r.op = 'fail' AND j.attempt >= j.max_attempts)
                        THEN now() END,
    lease_until = NULL
FROM r
-- id = ANY gives the planner the batch's size and the primary key: a plan
-- driven by a stale estimate of running rows could otherwise rescan the
-- arrays once per running row.
-- The state is tested inside a CASE, which the planner cannot match to
-- jobs_running_idx's predicate: after an ANALYZE of a quiet queue the
-- statistics say no job runs, and it then read every running row of the
-- index for each batch (all 100,000 of a burst, for 200 completions).
-- The batch is found through the primary key whatever the estimate.
WHERE j.id = ANY ($1::bigint[]) AND j.id = r.id AND j.fence = r.fence AND CASE WHEN j.state = 'running' THEN true END
RETURNING j.id, j.state, j.has_children
), settled AS (
    -- A job some job depends on settles its dependents in the same
    -- statement (see complete_many.sql): released when it completed,
    -- cancelled, run or left waiting, by each edge's policy, when it
    -- ended discarded or cancelled.
    SELECT {{schema}}.workflow_settle(array_agg(id), array_agg(state))
    FROM done WHERE has_children AND state IN ('completed', 'discarded', 'cancelled') HAVING count(*) > 0
)
-- As complete_many.sql returns it: one row with a null id carrying how
-- many dependents the batch changed (null when none), which a client
-- without a listen connection wakes its producers on, then one row per
-- id of the batch the update refused (stale fence, no longer running,
-- deleted), nearly always none. That first row is what runs settled: a
-- SELECT in WITH is evaluated only when the query reads it.
SELECT NULL::bigint AS id, (SELECT s FROM settled AS t(s)) AS settled
UNION ALL
-- The count is a one-time filter: a batch written whole looks up no id.
SELECT b.id, NULL FROM unnest($1::bigint[]) AS b(id)
WHERE (SELECT count(*) FROM done) < cardinality($1::bigint[]) AND b.id NOT IN (SELECT id FROM done)
