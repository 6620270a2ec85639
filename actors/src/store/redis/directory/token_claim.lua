-- KEYS: a token index key. ARGV: the value expected now ('' = absent),
-- the new value. → 1 when swapped, 0 when the key held something else.
local key = KEYS[1]
local expected, value = ARGV[1], ARGV[2]
local cur = redis.call('GET', key)
if (not cur and expected == '') or cur == expected then
  redis.call('SET', key, value)
  return 1
end
return 0
