-- KEYS: the room's hash. ARGV: the room's JSON, its creation time (ms).
-- → {'ok'} or {'exists'} (the conversation has a room; nothing changed).
local room = unpack(KEYS)
local json, at = unpack(ARGV)
if redis.call('EXISTS', room) == 1 then return {'exists'} end
redis.call('HSET', room, 'r', json, 'mrev', 1, 'a', at)
return {'ok'}
