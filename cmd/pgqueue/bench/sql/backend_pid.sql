-- backend_pid: the pid of this connection's backend, to check that the
-- server's processes can be read from this machine's /proc.
SELECT pg_backend_pid()
