-- elector_mark: record term $2 of lease $1 under the fence resource $3 as
-- held by a session too, while it is still the lease's live term. Only for
-- the leader whose session holds the election's session lock. No row
-- changed when the term is over.
INSERT INTO {{schema}}.fences AS f (resource, token)
SELECT $3, $2
WHERE EXISTS (SELECT 1 FROM {{schema}}.leases WHERE name = $1 AND fence = $2 AND expires_at > now())
ON CONFLICT (resource) DO UPDATE SET token = excluded.token, updated_at = now()
    WHERE f.token <= excluded.token
