-- job_retry: run job $1 again now, unless it is running, and wake the
-- listeners of channel $2 for its queue at commit. A scheduled, completed,
-- discarded or cancelled job becomes available now; its attempt and errors
-- stay, and max_attempts grows to attempt + 1 when the attempts were used
-- up, so it gets one more try. The UPDATE's WHERE is rechecked on the row's
-- latest version after any lock wait, so a job claimed meanwhile is skipped:
-- a running job's fence and lease are never written. The first column says
-- whether the job was retried; when it was not, the row is read under FOR
-- KEY SHARE (which waits for a claim in flight but not for the holder's
-- heartbeats or results), so the caller learns its current state.
WITH retried AS (
    UPDATE {{schema}}.jobs
    SET state               = 'available',
        run_at              = now(),
        finalized_at        = NULL,
        cancel_requested_at = NULL,
        max_attempts        = greatest(max_attempts, attempt + 1)
    WHERE id = $1 AND state IN ('scheduled', 'completed', 'discarded', 'cancelled')
    RETURNING id, queue, kind, args, priority, state, attempt, max_attempts,
              run_at, fence, lease_until, worker_id, errors, tags, meta,
              created_at, attempted_at, finalized_at, singleton_key, partition_key, sequence_key,
              cancel_requested_at, output, progress
), unchanged AS (
    SELECT id, queue, kind, args, priority, state, attempt, max_attempts,
           run_at, fence, lease_until, worker_id, errors, tags, meta,
           created_at, attempted_at, finalized_at, singleton_key, partition_key, sequence_key,
           cancel_requested_at, output, progress
    FROM {{schema}}.jobs
    WHERE id = $1 AND NOT EXISTS (SELECT 1 FROM retried)
    FOR KEY SHARE
)
SELECT true, r.* FROM retried r CROSS JOIN LATERAL (SELECT pg_notify($2, r.queue)) n
UNION ALL
SELECT false, c.* FROM unchanged c
