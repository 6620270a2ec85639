-- KEYS: the state hash, reads hash and deleted set of each conversation,
-- in threes. ARGV: participant id. → per conversation: the newest `seq`,
-- the participant's marker ("<seq> <message id>", or '') and how many
-- messages after the marker are deleted.
local participant_id = ARGV[1]
local out = {}
for i = 1, #KEYS, 3 do
  local marker = redis.call('HGET', KEYS[i + 1], participant_id) or ''
  local seq = string.match(marker, '^(%d+) ') or '0'
  table.insert(out, redis.call('HGET', KEYS[i], 'seq') or '0')
  table.insert(out, marker)
  table.insert(out, tostring(redis.call('ZCOUNT', KEYS[i + 2], '(' .. seq, '+inf')))
end
return out
