-- wal_position: the server's current WAL position in bytes, to tell how
-- much WAL a run wrote.
SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint
