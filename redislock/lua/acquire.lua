-- acquire: KEYS[1] the lock key, KEYS[2] its fence counter; ARGV[1] this
-- acquisition's random token, ARGV[2] the TTL in milliseconds. Returns the
-- new fence token, or false when another holder has the lock.
--
-- A missing counter starts at the server's clock in microseconds, not at
-- 0: after a restart that lost the data, the new tokens are still higher
-- than the old ones, so check_fence keeps letting the new holders write.
if redis.replicate_commands then
    -- Redis 3.2 to 6 replicate scripts that read TIME only this way; 7 and
    -- later always do, and keep the call as a no-op.
    redis.replicate_commands()
end
if not redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
    return false
end
if redis.call('EXISTS', KEYS[2]) == 0 then
    local t = redis.call('TIME')
    -- Strings, not Lua numbers: a double would print as 1.7e+15.
    redis.call('SET', KEYS[2], t[1] .. string.format('%06d', tonumber(t[2])))
end
return redis.call('INCR', KEYS[2])
