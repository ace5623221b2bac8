-- The example's business tables, in a schema of their own. Run by every
-- copy at start, under an advisory lock so that copies starting together
-- do not race on CREATE ... IF NOT EXISTS.
SELECT pg_advisory_xact_lock(hashtext('pgqueue-example-worker-schema'));
CREATE SCHEMA IF NOT EXISTS shop;
-- One row per charge: a charge job writes its row and completes in the
-- same transaction, so a job that ran twice (a worker killed after the
-- provider call, say) still leaves one row.
CREATE TABLE IF NOT EXISTS shop.payments (
    id           bigserial   PRIMARY KEY,
    order_id     bigint      NOT NULL,
    amount_cents bigint      NOT NULL,
    job_id       bigint      NOT NULL,
    fence        bigint      NOT NULL,
    paid_at      timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE IF NOT EXISTS shop.summaries (
    at          timestamptz PRIMARY KEY,
    payments    bigint      NOT NULL,
    total_cents bigint      NOT NULL
);
