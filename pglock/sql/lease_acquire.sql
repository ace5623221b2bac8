-- lease_acquire: take lease $1 for holder $2 for $3 microseconds if it is
-- free or expired. A takeover gets a new, higher fence. No row returned
-- means someone else holds it.
INSERT INTO {{schema}}.leases AS l (name, holder, fence, expires_at)
VALUES ($1, $2, nextval('{{schema}}.fence_seq'), now() + $3::bigint * interval '1 microsecond')
ON CONFLICT (name) DO UPDATE
    SET holder = excluded.holder, fence = excluded.fence,
        acquired_at = now(), expires_at = excluded.expires_at
    WHERE l.expires_at <= now()
RETURNING fence
