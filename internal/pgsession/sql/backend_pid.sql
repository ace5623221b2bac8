-- backend_pid: the process id of the backend that runs this statement.
SELECT pg_backend_pid()
