-- lease_release: end lease $1 held under fence $2 at once. The row stays, so
-- the lock's history (holder, fence) is kept; from an old fence this
-- changes nothing.
UPDATE {{schema}}.leases
SET expires_at = now()
WHERE name = $1 AND fence = $2 AND expires_at > now()
