-- KEYS: the group's hash. ARGV: lease name. → the holder of the lease
-- while its heartbeat lives (Redis's clock), else false. Read-only.
local group = KEYS[1]
local name = ARGV[1]
local cur = redis.call('HGET', group, 'n:' .. name)
if not cur then return false end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local beat = tonumber(redis.call('HGET', group, 'h:' .. cur) or '0')
if beat > now then return cur end
return false
