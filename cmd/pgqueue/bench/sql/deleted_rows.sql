-- deleted_rows: rows deleted from the jobs table since the server started,
-- by the statistics collector (a second or so behind): for the progress line.
SELECT coalesce(sum(n_tup_del), 0)::bigint FROM pg_stat_user_tables
WHERE relid = '{{schema}}.jobs'::regclass
