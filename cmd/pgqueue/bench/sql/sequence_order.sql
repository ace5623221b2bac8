-- sequence_order: for the sequence jobs of queue $1, how many completed,
-- and how many started before the job ahead of them in their sequence (by
-- id, the insert order) had finished, or while it had not: a sequence runs
-- one job at a time, in order, so that count must be zero. A start is
-- attempted_at, read after the claim lock; a finish finalized_at, the
-- result transaction's start, before any claim could see it.
SELECT count(*) FILTER (WHERE state = 'completed'),
       count(*) FILTER (WHERE attempted_at IS NOT NULL AND has_prev
                          AND (prev_finalized IS NULL OR attempted_at < prev_finalized)),
       count(DISTINCT sequence_key)
FROM (
    SELECT state, attempted_at,
           lag(true, 1, false) OVER w AS has_prev,
           lag(finalized_at) OVER w AS prev_finalized,
           sequence_key
    FROM {{schema}}.jobs
    WHERE queue = $1 AND sequence_key IS NOT NULL
    WINDOW w AS (PARTITION BY sequence_key ORDER BY id)
) s
