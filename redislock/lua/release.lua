-- release: KEYS[1] the lock key; ARGV[1] the holder's token. Deletes the
-- key only if it still holds the token: 1 when deleted, 0 otherwise.
if redis.call('GET', KEYS[1]) == ARGV[1] then
    return redis.call('DEL', KEYS[1])
end
return 0
