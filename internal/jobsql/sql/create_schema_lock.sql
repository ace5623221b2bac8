-- create_schema_lock: serialise concurrent creations of schema $1 for the
-- rest of the transaction: concurrent CREATE SCHEMA IF NOT EXISTS can
-- otherwise fail with a unique violation.
SELECT pg_advisory_xact_lock(hashtextextended('pgqueue:create-schema:' || $1, 0))
