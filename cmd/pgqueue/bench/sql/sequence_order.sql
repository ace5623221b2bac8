-- sequence_order: for the sequence jobs of queue $1, how many completed,
-- how many were claimed out of their sequence's order (by id, the insert
-- order), and how many sequences there were. Claims of the queue's
-- sequence jobs run one at a time under its claim lock, each taking
-- nextval('fence_seq'), so a sequence kept in order has its fences rising
-- with its ids; a job claimed twice (attempt > 1) counts as out of order.
-- attempted_at cannot tell: the plain claim sets it to its transaction's
-- start, which precedes the lock's grant.
SELECT count(*) FILTER (WHERE state = 'completed'),
       count(*) FILTER (WHERE attempt > 1 OR (fence IS NOT NULL AND prev_fence IS NOT NULL AND fence < prev_fence)
                          OR (fence IS NOT NULL AND has_prev AND prev_fence IS NULL)),
       count(DISTINCT sequence_key)
FROM (
    SELECT state, attempt, fence, sequence_key,
           lag(true, 1, false) OVER w AS has_prev,
           lag(fence) OVER w AS prev_fence
    FROM {{schema}}.jobs
    WHERE queue = $1 AND sequence_key IS NOT NULL
    WINDOW w AS (PARTITION BY sequence_key ORDER BY id)
) s
