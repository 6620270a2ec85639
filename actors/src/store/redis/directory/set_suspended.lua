-- Suspends (`flag` '1') or reinstates (`flag` '0') a participant, or the
-- Bay itself when `member` is '*' (no id can be '*'), and, when that
-- changes the state, logs the `Suspension` entry `event` in the same step
-- and publishes `change` on the credentials channel when its key is given
-- (`credentials`: absent on a Redis Cluster, as in set_token.lua).
-- KEYS and ARGV: `SetSuspendedKeys` and `SetSuspendedArgs` (directory.rs).
-- → {'ok', 1 changed / 0 already so} or {'missing'}
local bay, participants, suspended, log, epoch, log_meta, rosters, credentials = unpack(KEYS)
local member, flag, epoch_candidate, window_ms, max_entries, event, kept, change = unpack(ARGV)

if member == '*' then
  if redis.call('EXISTS', bay) == 0 then return {'missing'} end
elseif redis.call('HEXISTS', participants, member) == 0 then
  return {'missing'}
end
local changed
if flag == '1' then
  changed = redis.call('SADD', suspended, member)
else
  changed = redis.call('SREM', suspended, member)
end
if changed == 1 then
  append_log(log, epoch, log_meta, rosters, epoch_candidate, window_ms, max_entries, event)
  if credentials then publish_credentials(credentials, kept, change) end
end
return {'ok', changed}
