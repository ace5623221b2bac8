DROP FUNCTION IF EXISTS {{schema}}.check_fence(text, bigint);
DROP TABLE IF EXISTS {{schema}}.fences;
