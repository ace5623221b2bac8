-- job_retry_many: job_retry.sql for the jobs of ids $1, in one statement,
-- waking the listeners of channel $2 once per queue at commit (PostgreSQL
-- folds equal notifications of a transaction). Returns each job's id,
-- queue and what happened: 'retried', or the current state of a job left
-- alone (available, or running). Ids missing from the result have no job.
WITH retried AS (
    UPDATE {{schema}}.jobs
    SET state               = 'available',
        run_at              = now(),
        finalized_at        = NULL,
        cancel_requested_at = NULL,
        max_attempts        = greatest(max_attempts, attempt + 1)
    WHERE id = ANY ($1::bigint[]) AND state IN ('scheduled', 'completed', 'discarded', 'cancelled')
    RETURNING id, queue
), unchanged AS (
    SELECT j.id, j.queue, j.state
    FROM {{schema}}.jobs j
    WHERE j.id = ANY ($1::bigint[]) AND NOT EXISTS (SELECT 1 FROM retried r WHERE r.id = j.id)
    FOR KEY SHARE
)
SELECT r.id, r.queue, 'retried' FROM retried r CROSS JOIN LATERAL (SELECT pg_notify($2, r.queue)) n
UNION ALL
SELECT c.id, c.queue, c.state FROM unchanged c
