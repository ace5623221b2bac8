-- advisory_locks: the advisory locks held or awaited in this database now,
-- with the session behind each (pg_locks joined to pg_stat_activity). Both
-- key forms share classid/objid; objsubid tells them apart (1: one bigint,
-- 2: two int4, pglock's form).
SELECT l.classid::bigint, l.objid::bigint, l.objsubid::int, l.mode, l.granted, l.pid,
       coalesce(a.application_name, ''), coalesce(host(a.client_addr), ''),
       coalesce(a.usename::text, ''), coalesce(a.state, ''), a.backend_start
FROM pg_locks l
LEFT JOIN pg_stat_activity a ON a.pid = l.pid
WHERE l.locktype = 'advisory'
  AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
ORDER BY l.classid, l.objid, l.granted DESC, l.pid
