-- lease_renew: extend lease $1 held under fence $2 by $3 microseconds, only
-- while it has not expired: an expired lease may already be someone else's.
UPDATE {{schema}}.leases
SET expires_at = now() + $3::bigint * interval '1 microsecond'
WHERE name = $1 AND fence = $2 AND expires_at > now()
