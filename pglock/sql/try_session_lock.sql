-- try_session_lock: take the session advisory lock ($1, $2) if free; the
-- fence is taken only when it was. The backend's pid says which session
-- took it, checked against the connection's own.
SELECT got, CASE WHEN got THEN nextval('{{schema}}.fence_seq') END, pg_backend_pid()
FROM pg_try_advisory_lock($1::int4, $2::int4) AS got
