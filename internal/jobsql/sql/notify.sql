-- notify: wake the listeners of channel $1 for queue $2 when a job inserted
-- in the same transaction is due now ($3 is its run_at, or null). The
-- notification is delivered at commit, and not at all on rollback.
SELECT pg_notify($1, $2) WHERE $3::timestamptz IS NULL OR $3::timestamptz <= now()
