-- Fence tokens for writes outside pgqueue's own rows: the highest token seen
-- per resource. A writer records its token in the same transaction as its
-- write; a lower token than the one recorded is refused.
CREATE TABLE {{schema}}.fences (
    resource   text        PRIMARY KEY,
    token      bigint      NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now()
);

-- check_fence records token for resource, or raises SQLSTATE PQF01 when a
-- higher token was already recorded. The row lock taken by the upsert holds
-- until the caller's transaction ends, so a check and the write it guards
-- commit together. Equal tokens pass: one holder may write many times.
CREATE FUNCTION {{schema}}.check_fence(resource text, token bigint) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    seen bigint;
BEGIN
    INSERT INTO {{schema}}.fences AS f (resource, token)
    VALUES (check_fence.resource, check_fence.token)
    ON CONFLICT ON CONSTRAINT fences_pkey DO UPDATE
        SET token = excluded.token, updated_at = now()
        WHERE f.token <= excluded.token
    RETURNING f.token INTO seen;
    IF seen IS NULL THEN
        SELECT f.token INTO seen FROM {{schema}}.fences f WHERE f.resource = check_fence.resource;
        RAISE EXCEPTION 'stale fence token % for resource %: % already seen', check_fence.token, check_fence.resource, seen
            USING ERRCODE = 'PQF01';
    END IF;
    RETURN seen;
END
$$;
