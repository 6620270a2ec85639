-- KEYS: files, links, library, totals, message_files. ARGV: the message id.
-- Marks the message's files gone and takes them out of the library.
-- → {'ok', record JSON, ...}.
local files, links, library, totals, message_files = unpack(KEYS)
local mid = unpack(ARGV)
local out = {'ok'}
local ids = redis.call('HGET', message_files, mid)
if not ids then return out end
for id in string.gmatch(ids, '%S+') do
  local state = redis.call('HGET', links, id)
  if state then
    local words = {}
    for w in string.gmatch(state, '%S+') do words[#words + 1] = w end
    if words[1] == 's' and words[5] == mid then
      redis.call('HSET', links, id, 'g ' .. words[2])
      if redis.call('ZREM', library, id) == 1 then
        redis.call('HINCRBY', totals, 'files', -1)
        redis.call('HINCRBY', totals, 'bytes', -tonumber(words[3]))
      end
      local record = redis.call('HGET', files, id)
      if record then out[#out + 1] = record end
    end
  end
end
redis.call('HDEL', message_files, mid)
return out
