-- leases: the schema's lease locks (pglock's LeaseLocker and the
-- maintenance leader's) with how long each has left by the database clock;
-- a negative remainder is an expired lease nobody took yet.
SELECT name, holder, fence, acquired_at, expires_at,
       (extract(epoch FROM expires_at - now()) * 1000000)::bigint AS remaining_us
FROM {{schema}}.leases
ORDER BY name
