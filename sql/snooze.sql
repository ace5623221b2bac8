-- snooze: run again after $3 microseconds without spending an attempt. The
-- optional $4 note goes into errors (used for unknown kinds, so the reason a
-- job waits is visible); a plain snooze passes NULL and records nothing.
UPDATE {{schema}}.jobs
SET attempt = attempt - 1,
    errors = CASE WHEN $4::text IS NULL THEN errors
                  ELSE errors || jsonb_build_object('attempt', attempt, 'at', now(), 'error', $4::text) END,
    state = CASE WHEN $3::bigint <= 0 THEN 'available' ELSE 'scheduled' END,
    run_at = now() + greatest($3::bigint, 0) * interval '1 microsecond',
    lease_until = NULL
WHERE id = $1 AND fence = $2 AND state = 'running'
