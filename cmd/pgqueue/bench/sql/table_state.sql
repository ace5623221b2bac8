-- table_state: the size of the fetch index (the partial index on available
-- jobs that every claim reads), of the jobs table's heap and of all its
-- indexes, in bytes, and the table's live and dead rows and autovacuum
-- runs by the statistics (a second or so behind).
SELECT pg_relation_size('{{schema}}.jobs_fetch_idx'), pg_relation_size('{{schema}}.jobs'),
       pg_indexes_size('{{schema}}.jobs'),
       coalesce(s.n_live_tup, 0), coalesce(s.n_dead_tup, 0),
       coalesce(s.autovacuum_count, 0), coalesce(s.autoanalyze_count, 0),
       coalesce(s.n_tup_del, 0)
FROM (SELECT 1) one
LEFT JOIN pg_stat_user_tables s ON s.relid = '{{schema}}.jobs'::regclass
