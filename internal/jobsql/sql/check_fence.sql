-- check_fence: see migrations/000002_fences.up.sql.
SELECT {{schema}}.check_fence($1, $2)
