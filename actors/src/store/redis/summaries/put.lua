-- KEYS: the conversation's summary hash. ARGV: the new summary's JSON
-- body and its boundary's seq.
-- → {'ok', version} when stored (version = the stored one's + 1), or
--   {'stale', body, version} when the stored boundary lies after the new
--   one (nothing changed).
local summary = unpack(KEYS)
local body, seq = unpack(ARGV)
local cur = redis.call('HMGET', summary, 'body', 'seq', 'version')
local version = tonumber(cur[3]) or 0
if cur[1] and tonumber(cur[2]) > tonumber(seq) then
  return {'stale', cur[1], tostring(version)}
end
version = version + 1
redis.call('HSET', summary, 'body', body, 'seq', seq, 'version', tostring(version))
return {'ok', tostring(version)}
