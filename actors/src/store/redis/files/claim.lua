-- KEYS: files, links. ARGV: uploader, token, now (ms), until (ms), then the
-- attachment ids. Claims every id for the token, or none:
-- → {'ok', record JSON, ...} in the order asked, or {'conflict'} when one is
-- unknown, repeated, another uploader's, sent with another token, gone or
-- held by a live claim of another token.
local files, links = unpack(KEYS)
local uploader, token, now, until_ms = ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4]
local seen, out, fresh = {}, {'ok'}, {}
for i = 5, #ARGV do
  local id = ARGV[i]
  if seen[id] then return {'conflict'} end
  seen[id] = true
  local state = redis.call('HGET', links, id)
  local record = redis.call('HGET', files, id)
  if not state or not record then return {'conflict'} end
  local words = {}
  for w in string.gmatch(state, '%S+') do words[#words + 1] = w end
  if words[2] ~= uploader then return {'conflict'} end
  local kind = words[1]
  if kind == 'u' then
    fresh[#fresh + 1] = id
  elseif kind == 'c' then
    if words[3] ~= token and tonumber(words[4]) > now then return {'conflict'} end
    fresh[#fresh + 1] = id
  elseif kind == 's' then
    if words[8] ~= token then return {'conflict'} end
  else
    return {'conflict'}
  end
  out[#out + 1] = record
end
for _, id in ipairs(fresh) do
  redis.call('HSET', links, id, 'c ' .. uploader .. ' ' .. token .. ' ' .. until_ms)
end
return out
