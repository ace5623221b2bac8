-- flow_key, as in 000010, with the same keys, built with || instead of
-- concat_ws. concat_ws is only STABLE, so the IMMUTABLE flow_key was never
-- inlined: the planner keeps a function declared more constant than its
-- body as a call, and a limited claim paid one SQL function call per
-- candidate and per running job (about 20 µs each; a claim of 20 with a
-- limit per key took 3.6 ms instead of 1.2 ms). Every part is prefixed
-- with the separator and the first one dropped, which is what concat_ws
-- makes of parts that are never null (kind is not; each args value is
-- coalesced to 'null').
CREATE OR REPLACE FUNCTION {{schema}}.flow_key(partition_key text, kind text, args jsonb,
                                               by_kind boolean, by_args text[])
RETURNS text LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE
        WHEN partition_key IS NOT NULL THEN partition_key
        WHEN NOT by_kind AND cardinality(by_args) = 0 THEN NULL
        ELSE substr(
            CASE WHEN by_kind THEN chr(31) || kind ELSE '' END
            || CASE WHEN cardinality(by_args) >= 1 THEN chr(31) || coalesce(args -> by_args[1], 'null')::text ELSE '' END
            || CASE WHEN cardinality(by_args) >= 2 THEN chr(31) || coalesce(args -> by_args[2], 'null')::text ELSE '' END
            || CASE WHEN cardinality(by_args) >= 3 THEN chr(31) || coalesce(args -> by_args[3], 'null')::text ELSE '' END
            || CASE WHEN cardinality(by_args) >= 4 THEN chr(31) || coalesce(args -> by_args[4], 'null')::text ELSE '' END,
            2)
    END
$$;
