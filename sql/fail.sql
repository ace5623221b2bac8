-- fail: record a failed attempt ($3 error text, $4 stack trace or NULL) and
-- either schedule the retry after $5 microseconds or, once the attempts are
-- used up, discard the job. Fenced like every write to a claimed job.
UPDATE {{schema}}.jobs
SET errors = errors || jsonb_strip_nulls(jsonb_build_object(
        'attempt', attempt, 'at', now(), 'error', $3::text, 'trace', $4::text)),
    state = CASE WHEN attempt >= max_attempts THEN 'discarded'
                 WHEN $5::bigint <= 0 THEN 'available'
                 ELSE 'scheduled' END,
    run_at = CASE WHEN attempt >= max_attempts THEN run_at
                  ELSE now() + greatest($5::bigint, 0) * interval '1 microsecond' END,
    finalized_at = CASE WHEN attempt >= max_attempts THEN now() END,
    lease_until = NULL
WHERE id = $1 AND fence = $2 AND state = 'running'
RETURNING state, run_at
