-- KEYS: the room's hash. ARGV: the new name. → {'ok'} or {'missing'}.
-- The name is kept in `name`, over the one in `r` (the record as
-- created); the revision moves when `name` changes (the first rename
-- always moves it).
local room = unpack(KEYS)
local name = ARGV[1]
if redis.call('EXISTS', room) == 0 then return {'missing'} end
if redis.call('HGET', room, 'name') ~= name then
  redis.call('HSET', room, 'name', name)
  redis.call('HINCRBY', room, 'mrev', 1)
end
return {'ok'}
