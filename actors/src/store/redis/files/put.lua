-- KEYS: files, links. ARGV: id, the record's JSON, the uploader.
-- → {'ok'} after storing the upload unsent, or {'exists'} when the id is taken.
local files, links = unpack(KEYS)
local id, json, uploader = unpack(ARGV)
if redis.call('HSETNX', files, id, json) == 0 then return {'exists'} end
redis.call('HSET', links, id, 'u ' .. uploader)
return {'ok'}
