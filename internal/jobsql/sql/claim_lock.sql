-- claim_lock: take the claim lock of queue $2 in schema $1 until the end of
-- the transaction, waiting at most $3 milliseconds (lock_timeout, for this
-- transaction only: set_config runs first, and the wait reads it).
-- Sent before claim.sql in one implicit transaction (a pipeline with one
-- Sync) when the queue has a backlog, so that claims of a busy queue run
-- one at a time across every client,
-- and each claim's snapshot, taken when its statement starts, already sees
-- the previous claim committed. Concurrent claims instead meet rows that
-- another claim took after their snapshot: FOR UPDATE follows each to its
-- new version, locks it, and only then finds it no longer available, so
-- the claim skips it but keeps the lock until it commits, and the
-- completion of that running job waits for it. The wait is bounded because
-- a claim's holder can stall (a client stopped while the server sends it
-- the claimed rows): the claim then goes ahead without the lock, as claims
-- did before it. See docs/dev/design.md, "Claims one at a time".
-- Once granted, the lock is also noted in pgqueue.claim_locked for this
-- transaction: claims that must be exact (a limited queue's, a sequence's
-- jobs) read it and claim nothing without the lock, since only a snapshot
-- taken after it sees every earlier claim of the queue.
-- Sequential scans are off for the transaction, as for the claims without
-- the lock (claim_settings.sql says why).
-- JIT is off for the transaction: a limited queue's claim over a large
-- backlog is costed high enough to be compiled, and compiling took longer
-- (tens of milliseconds) than running it, every claim, under the lock.
SELECT set_config('lock_timeout', $3::bigint::text || 'ms', true),
       set_config('jit', 'off', true),
       set_config('enable_seqscan', 'off', true),
       pg_advisory_xact_lock(hashtextextended('pgqueue:claim:' || $1 || ':' || $2, 0)),
       set_config('pgqueue.claim_locked', $2, true)
