-- KEYS: the request's hash. → {'ok', target JSON} after deleting the
-- request, or {'missing'} when it is unknown, expired, claimed or still
-- pending (a pending request is left as it is).
local link = unpack(KEYS)
local target = redis.call('HGET', link, 'a')
if not target then return {'missing'} end
redis.call('DEL', link)
return {'ok', target}
