-- Autovacuum of the jobs table no longer truncates the heap's empty tail.
-- Truncating takes an ACCESS EXCLUSIVE lock on the table, which every
-- claim, insert and completion waits behind: on a queue at its steady rate
-- with a short retention, the pruner's deletes leave the heap's last pages
-- empty every few minutes, and the truncations stalled claims for up to a
-- second and a half (docs/dev/measurements/2026-12-06-steady-autovacuum.md).
-- The freed pages are reused by new rows instead; VACUUM (TRUNCATE) run by
-- hand still gives them back (docs/operations/autovacuum.md). Takes a
-- SHARE UPDATE EXCLUSIVE lock, which claims do not wait for.
ALTER TABLE {{schema}}.jobs SET (vacuum_truncate = false);
