-- KEYS: the request's hash. ARGV: the target's JSON.
-- → {'ok', request JSON}, {'missing'} (unknown, expired or claimed) or
-- {'exists'} (already approved). HSET keeps the key's TTL.
local link = unpack(KEYS)
local target = unpack(ARGV)
local request = redis.call('HGET', link, 'r')
if not request then return {'missing'} end
if redis.call('HEXISTS', link, 'a') == 1 then return {'exists'} end
redis.call('HSET', link, 'a', target)
return {'ok', request}
