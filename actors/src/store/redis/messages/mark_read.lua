-- Moves a read marker forward only, logging `read.updated`. KEYS and ARGV:
-- `MarkReadKeys` and `MarkReadArgs` (messages.rs). → {'ok', log id},
-- {'missing'} (no such conversation), or {'exists'} when the marker
-- already was at or past that message (nothing logged). The marker is the
-- newer of `reads` and the one the participant's last post set
-- (`r:<participant>` in the state hash).
local reads, log, epoch, log_meta, rosters, conversations, conversation_state = unpack(KEYS)
local participant_id, seq, message_id, event, conversation_id, epoch_candidate, window_ms,
  max_entries = unpack(ARGV)

if redis.call('HEXISTS', conversations, conversation_id) == 0 then return {'missing'} end
local cur = newer_marker(redis.call('HGET', reads, participant_id),
  redis.call('HGET', conversation_state, 'r:' .. participant_id))
if cur and tonumber(string.match(cur, '^(%d+)')) >= tonumber(seq) then
  return {'exists'}
end
redis.call('HSET', reads, participant_id, seq .. ' ' .. message_id)
local id = append_log(log, epoch, log_meta, rosters, epoch_candidate, window_ms, max_entries, event)
return {'ok', id}
