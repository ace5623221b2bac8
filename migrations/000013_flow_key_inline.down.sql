-- flow_key as 000010 made it (with concat_ws, never inlined).
CREATE OR REPLACE FUNCTION {{schema}}.flow_key(partition_key text, kind text, args jsonb,
                                    by_kind boolean, by_args text[])
RETURNS text LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE
        WHEN partition_key IS NOT NULL THEN partition_key
        WHEN NOT by_kind AND cardinality(by_args) = 0 THEN NULL
        ELSE concat_ws(chr(31),
            CASE WHEN by_kind THEN kind END,
            CASE WHEN cardinality(by_args) >= 1 THEN coalesce(args -> by_args[1], 'null')::text END,
            CASE WHEN cardinality(by_args) >= 2 THEN coalesce(args -> by_args[2], 'null')::text END,
            CASE WHEN cardinality(by_args) >= 3 THEN coalesce(args -> by_args[3], 'null')::text END,
            CASE WHEN cardinality(by_args) >= 4 THEN coalesce(args -> by_args[4], 'null')::text END)
    END
$$;
