-- KEYS: files, links. ARGV: attachment id, now (ms). Deletes an upload that
-- is unsent and not under a live claim. → {'ok'} when deleted, {'missing'}
-- when unknown, {'exists'} when it stays (sent, gone or claimed).
local files, links = unpack(KEYS)
local id, now = ARGV[1], tonumber(ARGV[2])
local state = redis.call('HGET', links, id)
if not state then
  redis.call('HDEL', files, id)
  return {'missing'}
end
local words = {}
for w in string.gmatch(state, '%S+') do words[#words + 1] = w end
if words[1] == 'u' or (words[1] == 'c' and tonumber(words[4]) <= now) then
  redis.call('HDEL', files, id)
  redis.call('HDEL', links, id)
  return {'ok'}
end
return {'exists'}
