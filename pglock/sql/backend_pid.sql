-- backend_pid: the server process this statement ran in. Two different
-- answers on one connection mean a pooler moves it between sessions.
SELECT pg_backend_pid()
