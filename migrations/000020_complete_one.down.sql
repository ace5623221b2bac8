DROP FUNCTION {{schema}}.complete_one(bigint, bigint);
