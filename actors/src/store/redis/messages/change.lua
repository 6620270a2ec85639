-- Replaces a message's body at the next version and logs the change.
-- KEYS and ARGV: `ChangeKeys` and `ChangeArgs` (messages.rs).
-- → {'ok', log id}, {'stale'}, {'conflict'} (the message is not at
-- version − 1) or {'missing'}.
local conversations, revisions, message_ids, versions, bodies, log, epoch, log_meta,
  rosters, deleted = unpack(KEYS)
local conversation_id, message_id, revision, version, body, event, epoch_candidate,
  window_ms, max_entries, deleted_seq = unpack(ARGV)

local rev = revision_of(conversations, revisions, conversation_id)
if not rev then return {'missing'} end
if rev ~= revision then return {'stale'} end
if redis.call('HEXISTS', message_ids, message_id) == 0 then return {'missing'} end
local current = tonumber(redis.call('HGET', versions, message_id) or '0')
if current + 1 ~= tonumber(version) then return {'conflict'} end
redis.call('HSET', versions, message_id, version)
redis.call('HSET', bodies, message_id, body)
if deleted_seq ~= '' then redis.call('ZADD', deleted, deleted_seq, message_id) end
local id = append_log(log, epoch, log_meta, rosters, epoch_candidate, window_ms, max_entries, event)
return {'ok', id}
