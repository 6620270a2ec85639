-- KEYS: the state hash, reads hash and deleted set of each conversation,
-- in threes. ARGV: participant id. → per conversation: the newest `seq`,
-- the participant's marker ("<seq> <message id>", or '') and how many
-- messages after the marker are deleted. The marker is the newer of the
-- explicit one (`reads`) and the one its last post set (`r:<participant>`
-- in the state hash).
local participant_id = ARGV[1]
local out = {}
for i = 1, #KEYS, 3 do
  local st = redis.call('HMGET', KEYS[i], 'seq', 'r:' .. participant_id)
  local marker = newer_marker(redis.call('HGET', KEYS[i + 1], participant_id), st[2]) or ''
  local seq = string.match(marker, '^(%d+) ') or '0'
  table.insert(out, st[1] or '0')
  table.insert(out, marker)
  table.insert(out, tostring(redis.call('ZCOUNT', KEYS[i + 2], '(' .. seq, '+inf')))
end
return out
