-- stat_statements: what each statement of this database cost the server
-- since the last reset, by pg_stat_statements: calls, execution and
-- planning time in ms, rows, shared blocks hit, read, dirtied and written,
-- and WAL bytes. Every connection's, the bench's own reads included.
SELECT query, calls, total_exec_time, total_plan_time, rows,
       shared_blks_hit, shared_blks_read, shared_blks_dirtied, shared_blks_written,
       wal_bytes::bigint
FROM pg_stat_statements
WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
ORDER BY total_exec_time + total_plan_time DESC
