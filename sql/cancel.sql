-- cancel: a handler asked for no more attempts; the reason is kept with the
-- other errors.
UPDATE {{schema}}.jobs
SET errors = errors || jsonb_build_object('attempt', attempt, 'at', now(), 'error', $3::text),
    state = 'cancelled', finalized_at = now(), lease_until = NULL
WHERE id = $1 AND fence = $2 AND state = 'running'
