-- session_lock: wait for the session advisory lock ($1, $2), then take a
-- fence token for this acquisition. The lock is in FROM so that it is taken
-- before the fence is drawn. The backend's pid says which session took it,
-- checked against the connection's own.
SELECT nextval('{{schema}}.fence_seq'), pg_backend_pid()
FROM pg_advisory_lock($1::int4, $2::int4)
