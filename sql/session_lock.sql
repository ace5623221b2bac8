-- session_lock: wait for the session advisory lock ($1, $2) and take a fence
-- token for this acquisition.
SELECT pg_advisory_lock($1::int4, $2::int4), nextval('{{schema}}.fence_seq')
