-- Whether golang-migrate's version table exists: to_regclass answers NULL,
-- without an error, for a missing table or schema.
SELECT to_regclass('{{schema}}.schema_migrations') IS NOT NULL
