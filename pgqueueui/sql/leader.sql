-- leader: the maintenance leader's lease ($1 is its name), if anyone holds
-- or held it; remaining_us is negative once it expired.
SELECT holder, fence, acquired_at,
       (extract(epoch FROM expires_at - now()) * 1000000)::bigint AS remaining_us
FROM {{schema}}.leases
WHERE name = $1
