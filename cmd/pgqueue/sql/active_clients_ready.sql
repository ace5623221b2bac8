-- active_clients_ready: whether the tables active_clients reads exist
-- ($1 the leases table, $2 the jobs table, schema-qualified and quoted):
-- to_regclass answers NULL, without an error, for a missing one.
SELECT to_regclass($1) IS NOT NULL AND to_regclass($2) IS NOT NULL
