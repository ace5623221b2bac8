-- enqueued: the jobs of kind $1 whose args contain $2 (any args when $2 is
-- null), oldest first, with what RequireEnqueued compares (the state as
-- job_state shows it).
SELECT id, queue, kind, args, priority, {{schema}}.job_state(state, gate_id, queue), attempt, max_attempts, run_at, tags, meta,
       created_at, coalesce(singleton_key, ''), unique_key IS NOT NULL
FROM {{schema}}.jobs
WHERE kind = $1 AND ($2::jsonb IS NULL OR args @> $2::jsonb)
ORDER BY id
