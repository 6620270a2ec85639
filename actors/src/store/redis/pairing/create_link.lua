-- KEYS: the request's hash. ARGV: the request's JSON, its TTL in ms.
-- → {'ok'}, or {'exists'} when the id is taken.
local link = unpack(KEYS)
local request, ttl_ms = unpack(ARGV)
if redis.call('EXISTS', link) == 1 then return {'exists'} end
redis.call('HSET', link, 'r', request)
redis.call('PEXPIRE', link, ttl_ms)
return {'ok'}
