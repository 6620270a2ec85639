-- KEYS: the state and reads hashes of each conversation, in pairs. ARGV:
-- participant id. → per conversation: the newest `seq` and the
-- participant's marker ("<seq> <message id>", or '').
local participant_id = ARGV[1]
local out = {}
for i = 1, #KEYS, 2 do
  table.insert(out, redis.call('HGET', KEYS[i], 'seq') or '0')
  table.insert(out, redis.call('HGET', KEYS[i + 1], participant_id) or '')
end
return out
