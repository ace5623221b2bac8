-- The applied version and the dirty flag; no row when none is applied.
SELECT version, dirty FROM {{schema}}.schema_migrations LIMIT 1
