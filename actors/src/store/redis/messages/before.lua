-- KEYS: `HistoryKeys` (messages.rs). ARGV: before message id ('' =
-- none), limit. → {has_more (0/1), json...} newest first: the `limit`
-- messages before `before` (or the newest), and whether older ones
-- remain. An unknown `before` gives nothing.
local messages, message_ids, bodies = unpack(KEYS)
local before = ARGV[1]
local limit = tonumber(ARGV[2])
local start = '+'
if before ~= '' then
  local sid = redis.call('HGET', message_ids, before)
  if not sid then return {0} end
  start = '(' .. sid
end
local r = redis.call('XREVRANGE', messages, start, '-', 'COUNT', limit + 1)
local out = {0}
if #r > limit then out[1] = 1 end
for i = 1, math.min(#r, limit) do
  local body = body_of(bodies, r[i][2])
  if body then table.insert(out, body) end
end
return out
