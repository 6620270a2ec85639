-- Appends one flush window's text to an open draft and logs the
-- `message.delta`, if the draft is open and at the expected version.
-- KEYS and ARGV: `AppendDraftKeys` and `AppendDraftArgs` (drafts.rs).
-- → {'ok', entry id, new version}, {'closed'}, {'conflict'}, {'stale'} or
-- {'missing'}.
local versions, draft_text, drafts, log, epoch, log_meta, rosters, conversations,
  revisions = unpack(KEYS)
local message_id, version, text, event, epoch_candidate, window_ms, max_entries,
  conversation_id, revision = unpack(ARGV)

local rev = revision_of(conversations, revisions, conversation_id)
if not rev then return {'missing'} end
if rev ~= revision then return {'stale'} end
-- The draft index: a draft is open while it is in `drafts`.
if not redis.call('ZSCORE', drafts, message_id) then return {'closed'} end
local current = tonumber(redis.call('HGET', versions, message_id) or '0')
if current ~= tonumber(version) then return {'conflict'} end
local next_version = string.format('%d', current + 1)
redis.call('HSET', versions, message_id, next_version)
redis.call('APPEND', draft_text, text)
redis.call('ZADD', drafts, now_ms(), message_id)
local id = append_log(log, epoch, log_meta, rosters, epoch_candidate, window_ms, max_entries, event)
return {'ok', id, next_version}
