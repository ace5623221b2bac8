DROP FUNCTION {{schema}}.enqueue(text, jsonb, text, smallint, timestamptz, int, text[], jsonb, text, interval, text[]);
