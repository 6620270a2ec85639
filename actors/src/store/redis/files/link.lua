-- KEYS: links, library, totals, message_files. ARGV: token, cid, mid, now
-- (ms), then pairs of attachment id and size. Turns the token's claims into
-- sent files of the message, appended to the library in order.
-- → {'ok', how many were linked}.
local links, library, totals, message_files = unpack(KEYS)
local token, cid, mid, now = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local linked = {}
for i = 5, #ARGV, 2 do
  local id, size = ARGV[i], ARGV[i + 1]
  local state = redis.call('HGET', links, id)
  if state then
    local words = {}
    for w in string.gmatch(state, '%S+') do words[#words + 1] = w end
    if words[1] == 'c' and words[3] == token then
      local seq = redis.call('HINCRBY', totals, 'seq', 1)
      redis.call('HSET', links, id, table.concat(
        {'s', words[2], size, cid, mid, seq, now, token}, ' '))
      redis.call('ZADD', library, seq, id)
      redis.call('HINCRBY', totals, 'files', 1)
      redis.call('HINCRBY', totals, 'bytes', size)
      linked[#linked + 1] = id
    end
  end
end
if #linked > 0 then
  local before = redis.call('HGET', message_files, mid)
  local ids = table.concat(linked, ' ')
  if before then ids = before .. ' ' .. ids end
  redis.call('HSET', message_files, mid, ids)
end
return {'ok', #linked}
