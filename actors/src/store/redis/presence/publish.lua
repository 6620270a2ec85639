-- Publishes presence changes, each with its `presence.updated` log entry.
-- Compare-and-set: when any participant's published state is not the
-- expected one, nothing is written. KEYS: `PublishPresenceKeys`
-- (presence.rs). ARGV: the log append's arguments, then per change four
-- values: participant id, the state it was computed against, the new
-- state ('offline' removes the participant), the event JSON.
-- → {'ok', id...} or {'conflict'}
local log, epoch, log_meta, rosters, presence_states = unpack(KEYS)
local epoch_candidate, window_ms, max_entries = ARGV[1], ARGV[2], ARGV[3]

for i = 4, #ARGV, 4 do
  local cur = redis.call('HGET', presence_states, ARGV[i]) or 'offline'
  if cur ~= ARGV[i + 1] then return {'conflict'} end
end
local out = {'ok'}
for i = 4, #ARGV, 4 do
  if ARGV[i + 2] == 'offline' then
    redis.call('HDEL', presence_states, ARGV[i])
  else
    redis.call('HSET', presence_states, ARGV[i], ARGV[i + 2])
  end
  table.insert(out, append_log(log, epoch, log_meta, rosters, epoch_candidate, window_ms,
    max_entries, ARGV[i + 3]))
end
return out
