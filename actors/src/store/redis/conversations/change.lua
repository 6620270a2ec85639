-- Compare-and-set of a conversation: the change (made in Rust on the JSON
-- read) applies only if nobody changed the conversation since; the
-- `Roster` entry, the roster change and the new revision happen in the
-- same step. KEYS and ARGV: `ChangeConversationKeys` and
-- `ChangeConversationArgs` (conversations.rs).
-- → {'ok', entry id}, {'missing'} or {'conflict'}
local conversations, revisions, log, epoch, log_meta, rosters = unpack(KEYS)
local conversation_id, expected, conversation, event, epoch_candidate, window_ms,
  max_entries, roster_change, revision = unpack(ARGV)

local cur = redis.call('HGET', conversations, conversation_id)
if not cur then return {'missing'} end
if cur ~= expected then return {'conflict'} end
redis.call('HSET', conversations, conversation_id, conversation)
redis.call('HSET', revisions, conversation_id, revision)
local id = append_log(log, epoch, log_meta, rosters, epoch_candidate, window_ms, max_entries, event)
redis.call('XADD', rosters, id, 'r', roster_change)
return {'ok', id}
