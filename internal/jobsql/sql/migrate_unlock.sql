-- migrate_unlock: release migrate_lock; false when this session did not
-- hold it.
SELECT pg_advisory_unlock(hashtextextended('pgqueue:migrate:' || $1, 0))
