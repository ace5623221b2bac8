-- backends: the server processes a run's CPU is read from: the client
-- backends of the run's connections (application_name $1), and every
-- process that is not a client backend (walwriter, checkpointer,
-- background writer, autovacuum, ...), which serves the whole server.
SELECT pid, application_name = $1 AS ours
FROM pg_stat_activity
WHERE application_name = $1 OR backend_type <> 'client backend'
