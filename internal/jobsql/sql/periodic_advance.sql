-- periodic_advance: record that periodic job $1 is done up to instant $2,
-- in the transaction that enqueued its runs. It changes nothing (and the
-- transaction is rolled back) unless $2 is later than the instant recorded
-- and due by the database clock: the database, not a leader's memory,
-- keeps an instant from being enqueued twice.
UPDATE {{schema}}.periodic_jobs
SET last_instant = $2, updated_at = now()
WHERE name = $1 AND last_instant < $2 AND $2 <= now()
