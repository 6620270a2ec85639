-- KEYS: links. ARGV: token, then attachment ids. Frees the token's claims.
-- → {'ok'}.
local links = unpack(KEYS)
local token = ARGV[1]
for i = 2, #ARGV do
  local state = redis.call('HGET', links, ARGV[i])
  if state then
    local words = {}
    for w in string.gmatch(state, '%S+') do words[#words + 1] = w end
    if words[1] == 'c' and words[3] == token then
      redis.call('HSET', links, ARGV[i], 'u ' .. words[2])
    end
  end
end
return {'ok'}
