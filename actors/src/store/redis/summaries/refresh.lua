-- KEYS: the conversation's refresh sorted set. ARGV: the most refreshes
-- per window, the window in ms, a fresh member name.
-- → {'ok'} when counted, or {'conflict', ms until the oldest counted
--   refresh leaves the window} when the budget is spent (not counted).
local refreshes = unpack(KEYS)
local max, window, member = unpack(ARGV)
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
window = tonumber(window)
redis.call('ZREMRANGEBYSCORE', refreshes, '-inf', now - window)
if redis.call('ZCARD', refreshes) >= tonumber(max) then
  local oldest = redis.call('ZRANGE', refreshes, 0, 0, 'WITHSCORES')
  local wait = tonumber(oldest[2]) + window - now
  if wait < 1 then wait = 1 end
  return {'conflict', tostring(wait)}
end
redis.call('ZADD', refreshes, now, member)
redis.call('PEXPIRE', refreshes, window)
return {'ok'}
