-- stat_statements_create: the pg_stat_statements view in this database; the
-- server must load the library (shared_preload_libraries).
CREATE EXTENSION IF NOT EXISTS pg_stat_statements
