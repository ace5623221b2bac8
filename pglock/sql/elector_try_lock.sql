-- elector_try_lock: take the election's session advisory lock ($1, $2) if
-- no session holds it: got means no leader's session is alive. The
-- backend's pid says which session took it, checked against the
-- connection's own.
SELECT pg_try_advisory_lock($1::int4, $2::int4), pg_backend_pid()
