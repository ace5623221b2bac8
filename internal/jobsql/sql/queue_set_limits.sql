-- queue_set_limits: store queue $1's flow limits (null: none) and wake the
-- listeners of channel $10 for it at commit. From the commit on, every
-- client's claim of the queue obeys them: claim.sql refuses a limited
-- queue, and claim_flow.sql reads the limits in each claim. Producers
-- switch to claim_flow.sql at their next poll.
WITH stored AS (
    INSERT INTO {{schema}}.queues AS q (name, max_running, max_running_per_key, rate_limit, rate_period_us,
                                        rate_per_key, partition_by_kind, partition_by_args, sequence_continue)
    VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
    ON CONFLICT (name) DO UPDATE
    SET max_running = excluded.max_running, max_running_per_key = excluded.max_running_per_key,
        rate_limit = excluded.rate_limit, rate_period_us = excluded.rate_period_us,
        rate_per_key = excluded.rate_per_key, partition_by_kind = excluded.partition_by_kind,
        partition_by_args = excluded.partition_by_args, sequence_continue = excluded.sequence_continue,
        updated_at = now()
), forgotten AS (
    -- A changed rate starts from its recorded starts only while it keeps
    -- its mode; removing it drops them.
    DELETE FROM {{schema}}.flow_rates WHERE queue = $1 AND $4::integer IS NULL
)
SELECT pg_notify($10, $1::text)
