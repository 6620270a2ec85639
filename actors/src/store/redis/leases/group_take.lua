-- KEYS: the group's hash. ARGV: lease name, holder, ttl ms. Renews the
-- holder's heartbeat, then takes the lease if it is free, the holder's
-- already, or held by a holder whose heartbeat lapsed (Redis's clock).
-- → 1 when the holder has the lease now, else 0.
local group = KEYS[1]
local name, holder, ttl_ms = ARGV[1], ARGV[2], tonumber(ARGV[3])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('HSET', group, 'h:' .. holder, now + ttl_ms)
local cur = redis.call('HGET', group, 'n:' .. name)
if cur and cur ~= holder then
  local beat = tonumber(redis.call('HGET', group, 'h:' .. cur) or '0')
  if beat > now then return 0 end
  redis.call('HDEL', group, 'h:' .. cur)
end
redis.call('HSET', group, 'n:' .. name, holder)
return 1
