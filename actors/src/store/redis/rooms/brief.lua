-- KEYS: the room's hash. ARGV: 'pin' or 'unpin', the message id.
-- → {'ok', brief or false, mrev} or {'missing'}. The revision moves only
-- when the brief really changes.
local room = unpack(KEYS)
local op, id = unpack(ARGV)
if redis.call('EXISTS', room) == 0 then return {'missing'} end
local brief = redis.call('HGET', room, 'brief')
if op == 'pin' then
  if brief ~= id then
    redis.call('HSET', room, 'brief', id)
    redis.call('HINCRBY', room, 'mrev', 1)
    brief = id
  end
elseif brief == id then
  redis.call('HDEL', room, 'brief')
  redis.call('HINCRBY', room, 'mrev', 1)
  brief = false
end
return {'ok', brief, redis.call('HGET', room, 'mrev')}
