-- lease_takeover: take lease $1 for holder $2 for $3 microseconds whether
-- or not its holder's lease has expired, with a new, higher fence. Only for
-- an elector that holds the election's session lock: that proves no
-- leader's session is alive. Returns the new fence and the lease as it was
-- (holder, fence, whether it was still valid; NULLs when there was none).
WITH old AS (
    SELECT holder, fence, expires_at > now() AS valid
    FROM {{schema}}.leases WHERE name = $1
    FOR UPDATE
)
INSERT INTO {{schema}}.leases AS l (name, holder, fence, expires_at)
VALUES ($1, $2, nextval('{{schema}}.fence_seq'), now() + $3::bigint * interval '1 microsecond')
ON CONFLICT (name) DO UPDATE
    SET holder = excluded.holder, fence = excluded.fence,
        acquired_at = now(), expires_at = excluded.expires_at
RETURNING l.fence, (SELECT holder FROM old), (SELECT fence FROM old), (SELECT valid FROM old)
