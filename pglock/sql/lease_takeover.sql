-- lease_takeover: take lease $1 for holder $2 for $3 microseconds, with a
-- new, higher fence, when it is free or expired, or when its term is the
-- one recorded under the fence resource $4 as held by a session too. Only
-- for an elector whose session holds the election's session lock: that
-- proves the session of the term recorded in $4 has ended. The new term is
-- recorded in $4 in the same statement. Returns the new fence and the lease
-- as it was (holder, fence, whether it was still valid; NULLs when there
-- was none); no row when a live term held by no session has it.
WITH old AS (
    SELECT holder, fence, expires_at > now() AS valid
    FROM {{schema}}.leases WHERE name = $1
    FOR UPDATE
), taken AS (
    INSERT INTO {{schema}}.leases AS l (name, holder, fence, expires_at)
    VALUES ($1, $2, nextval('{{schema}}.fence_seq'), now() + $3::bigint * interval '1 microsecond')
    ON CONFLICT (name) DO UPDATE
        SET holder = excluded.holder, fence = excluded.fence,
            acquired_at = now(), expires_at = excluded.expires_at
        WHERE l.expires_at <= now()
           OR l.fence = (SELECT f.token FROM {{schema}}.fences f WHERE f.resource = $4)
    RETURNING l.fence
), marked AS (
    INSERT INTO {{schema}}.fences AS f (resource, token)
    SELECT $4, fence FROM taken
    ON CONFLICT (resource) DO UPDATE SET token = excluded.token, updated_at = now()
        WHERE f.token < excluded.token
)
SELECT fence, (SELECT holder FROM old), (SELECT fence FROM old), (SELECT valid FROM old)
FROM taken
