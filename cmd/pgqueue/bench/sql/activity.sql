-- activity: what runs in this database beside the sustained load, for its
-- report: an autovacuum worker on the jobs table ($1, its name without the
-- schema, as the worker's query names it), and a pruner batch in flight.
SELECT EXISTS (SELECT 1 FROM pg_stat_activity
               WHERE datname = current_database() AND backend_type = 'autovacuum worker'
                 AND query LIKE '%' || $1 || '%'),
       EXISTS (SELECT 1 FROM pg_stat_activity
               WHERE datname = current_database() AND state = 'active' AND query LIKE '-- prune:%')
