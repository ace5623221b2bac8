-- locks_advisory: the advisory locks held or awaited in this database
-- right now, with the session behind each. pglock's keys are the two-int4
-- form (objsubid 2): classid is the schema's class, objid the name's hash;
-- the one-bigint form (objsubid 1, golang-migrate's and most
-- applications') splits its key over the same two columns.
SELECT l.classid::bigint, l.objid::bigint, l.objsubid::int, l.mode, l.granted, l.pid,
       coalesce(a.application_name, ''), coalesce(host(a.client_addr), ''), coalesce(a.usename::text, ''),
       coalesce(a.state, ''),
       coalesce((extract(epoch FROM now() - a.backend_start) * 1000000)::bigint, 0) AS session_us
FROM pg_locks l
LEFT JOIN pg_stat_activity a ON a.pid = l.pid
WHERE l.locktype = 'advisory'
  AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
ORDER BY l.classid, l.objid, l.granted DESC, l.pid
