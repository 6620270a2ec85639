-- KEYS: the lease. ARGV: holder, ttl ms. → 1 when the holder has the
-- lease now (taken or renewed), else 0.
local lease = KEYS[1]
local holder, ttl_ms = ARGV[1], ARGV[2]
local cur = redis.call('GET', lease)
if cur and cur ~= holder then return 0 end
redis.call('SET', lease, holder, 'PX', ttl_ms)
return 1
