-- migrate_lock: wait for the session lock that makes one migration run
-- (version read, steps, version read) exclusive for schema $1.
SELECT pg_advisory_lock(hashtextextended('pgqueue:migrate:' || $1, 0))
