-- KEYS: a token index key. ARGV: the value expected. Deletes the key
-- only while it still holds that value. → 1 deleted, 0 not.
local key, expected = KEYS[1], ARGV[1]
if redis.call('GET', key) == expected then
  return redis.call('DEL', key)
end
return 0
