-- KEYS: the group's hash. ARGV: holder, ttl ms. Renews the holder's
-- heartbeat (Redis's clock).
local group = KEYS[1]
local holder, ttl_ms = ARGV[1], tonumber(ARGV[2])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('HSET', group, 'h:' .. holder, now + ttl_ms)
return 1
