-- KEYS: history stream, bodies. ARGV: first stream id (inclusive, or
-- '-'), count. → message JSONs, oldest first.
local messages, bodies = KEYS[1], KEYS[2]
local first, count = ARGV[1], ARGV[2]
local out = {}
for _, e in ipairs(redis.call('XRANGE', messages, first, '+', 'COUNT', count)) do
  local body = body_of(bodies, e[2])
  if body then table.insert(out, body) end
end
return out
