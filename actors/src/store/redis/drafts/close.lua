-- Ends an open draft: stores its final body, logs the change and drops
-- the draft's text and index entries; with a round step (`sender_kind`
-- not ''), applies the round cap like `messages/append.lua` and picks the
-- body and event rendered with the resulting `suppressed` flag.
-- KEYS and ARGV: `CloseDraftKeys` and `CloseDraftArgs` (drafts.rs).
-- → {'ok', entry id, 'true'|'false'}, {'stale'}, {'conflict'} or
-- {'missing'}.
local conversations, revisions, message_ids, versions, bodies, log, epoch, log_meta,
  rosters, conversation_state, draft_text, drafts, draft_info = unpack(KEYS)
local conversation_id, message_id, revision, version, body, event, epoch_candidate,
  window_ms, max_entries, sender_kind, round_cap, body_suppressed, event_suppressed,
  given_suppressed = unpack(ARGV)

local rev = revision_of(conversations, revisions, conversation_id)
if not rev then return {'missing'} end
if rev ~= revision then return {'stale'} end
if redis.call('HEXISTS', message_ids, message_id) == 0 then return {'missing'} end
if not redis.call('ZSCORE', drafts, message_id) then return {'conflict'} end
local current = tonumber(redis.call('HGET', versions, message_id) or '0')
if current + 1 ~= tonumber(version) then return {'conflict'} end
local suppressed = given_suppressed
if sender_kind ~= '' then
  local rounds = tonumber(redis.call('HGET', conversation_state, 'rounds') or '0')
  rounds, suppressed = round_step(rounds, sender_kind, round_cap, suppressed)
  redis.call('HSET', conversation_state, 'rounds', string.format('%d', rounds))
end
if sender_kind ~= '' and suppressed == 'true' then
  body, event = body_suppressed, event_suppressed
end
redis.call('HSET', versions, message_id, version)
redis.call('HSET', bodies, message_id, body)
redis.call('DEL', draft_text)
redis.call('ZREM', drafts, message_id)
redis.call('HDEL', draft_info, message_id)
local id = append_log(log, epoch, log_meta, rosters, epoch_candidate, window_ms, max_entries, event)
return {'ok', id, suppressed}
