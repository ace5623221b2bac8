-- stat_statements_reset: forget this database's statement statistics, at
-- the start of a timed run. Other databases' are kept.
SELECT pg_stat_statements_reset(0, (SELECT oid FROM pg_database WHERE datname = current_database()), 0)
