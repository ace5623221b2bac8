-- check_fence: record token $2 for resource $1, or raise PQF01 when a
-- higher one was seen; see migrations/000002_fences.up.sql.
SELECT {{schema}}.check_fence($1, $2)
