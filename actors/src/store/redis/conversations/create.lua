-- Creates a conversation with its first revision, and logs its `Roster`
-- entry and roster change (no members before) in the same step. KEYS and
-- ARGV: `CreateConversationKeys` and `CreateConversationArgs`
-- (conversations.rs). → {'ok', entry id}, {'nobay'} or {'exists'}
local bay, conversations, revisions, log, epoch, log_meta, rosters = unpack(KEYS)
local conversation_id, conversation, event, epoch_candidate, window_ms, max_entries,
  roster_change, revision = unpack(ARGV)

if redis.call('EXISTS', bay) == 0 then return {'nobay'} end
if redis.call('HEXISTS', conversations, conversation_id) == 1 then return {'exists'} end
redis.call('HSET', conversations, conversation_id, conversation)
redis.call('HSET', revisions, conversation_id, revision)
local id = append_log(log, epoch, log_meta, rosters, epoch_candidate, window_ms, max_entries, event)
redis.call('XADD', rosters, id, 'r', roster_change)
return {'ok', id}
