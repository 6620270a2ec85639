-- KEYS: the room's hash. ARGV: the activity time (ms). Moves `a` forward
-- only, and only on an existing room. → {'ok'} or {'missing'}.
local room = unpack(KEYS)
local at = tonumber(ARGV[1])
if redis.call('EXISTS', room) == 0 then return {'missing'} end
local last = tonumber(redis.call('HGET', room, 'a')) or 0
if at > last then redis.call('HSET', room, 'a', ARGV[1]) end
return {'ok'}
