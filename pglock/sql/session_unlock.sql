-- session_unlock: false when this session did not hold the lock.
SELECT pg_advisory_unlock($1::int4, $2::int4)
