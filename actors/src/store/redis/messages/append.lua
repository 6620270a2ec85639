-- Appends a batch of messages of one Bay, in order (the posts one node
-- had waiting for the Bay while its previous batch ran; messages/batch.rs).
-- Each message gets what a lone append did, and its own answer: revision
-- check, the sender's request budget, idempotency, round step, `createdAt`
-- floor, `seq`, history, "posting reads", the poll and draft indexes and
-- the log entry. What the messages share is done once per batch: the log
-- meta read and write, the epoch, the trim check, the entry cap and the
-- budget clock (`TIME`). A message that fails with an error is answered
-- `{'failed', error}` and the others go on (Redis keeps what a script
-- wrote before an error, batched or not).
--
-- KEYS: `AppendKeys` (the Bay's), then per message `MessageKeys` (7 each).
-- ARGV: `AppendArgs`, then per message `MessageArgs` (21 each).
-- → one answer per message, in order: {'ok', log id, createdAt ms,
-- suppressed, seq}, {'stale'}, {'missing'}, {'limited', wait µs} (the
-- budget is spent), {'exists', first message JSON} (an idempotent retry),
-- {'conflict'} (the key was used for another request) or {'failed', error}.
local conversations, revisions, log, epoch, log_meta, rosters, polls, drafts,
  draft_info = unpack(KEYS, 1, 9)
local epoch_candidate, window_ms, max_entries = unpack(ARGV, 1, 3)
local KEYS_EACH, ARGS_EACH = 7, 21

local l = nil
local budget_now = nil
-- The revision of each conversation, read once per batch (an append never
-- changes it).
local revision_seen = {}

local function append_one(k, a)
  local conversation_state, messages, message_ids, bodies, idempotency, draft_text,
    budget = unpack(KEYS, k, k + KEYS_EACH - 1)
  local conversation_id, message_id, sender_kind, round_cap, given_suppressed,
    message_0, message_1, message_2, message_3, event_0, event_1, revision,
    fingerprint, poll_id, sender_id, draft_author, draft_content, clock_ms, clock_iso,
    budget_interval, budget_burst = unpack(ARGV, a, a + ARGS_EACH - 1)

  local rev = revision_seen[conversation_id]
  if rev == nil then
    rev = revision_of(conversations, revisions, conversation_id)
    revision_seen[conversation_id] = rev
  end
  if not rev then return {'missing'} end
  if rev ~= revision then return {'stale'} end
  if budget_interval ~= '' then
    -- After the revision check (a stale append is routed again and takes
    -- then), before idempotency (a retry costs a call, as it always has).
    if not budget_now then
      local t = redis.call('TIME')
      budget_now = tonumber(t[1]) * 1000000 + tonumber(t[2])
    end
    local wait = take_budget(budget, tonumber(budget_interval), tonumber(budget_burst),
      budget_now)
    if wait then return {'limited', string.format('%d', wait)} end
  end
  if fingerprint ~= '' then
    local seen = redis.call('GET', idempotency)
    if seen then
      local fp, mid = string.match(seen, '^(%S+) %S+ (%S+)$')
      if fp ~= fingerprint then return {'conflict'} end
      -- The fingerprint covers the conversation: the first message is here.
      return {'exists', redis.call('HGET', bodies, mid) or ''}
    end
  end
  local st = redis.call('HMGET', conversation_state, 'rounds', 'last_ms', 'seq')
  local rounds = tonumber(st[1] or '0')
  local suppressed = given_suppressed
  if draft_author ~= '' then
    -- A draft: the round cap applies at completion. Its text so far lives
    -- apart, so appends are APPENDs; the sweep index notes its author.
    redis.call('SET', draft_text, draft_content)
    redis.call('ZADD', drafts, now_ms(), message_id)
    redis.call('HSET', draft_info, message_id, conversation_id .. ' ' .. draft_author)
  else
    rounds, suppressed = round_step(rounds, sender_kind, round_cap, suppressed)
  end
  local prev_ms = tonumber(st[2])
  if not prev_ms then
    -- History written before the state hash existed.
    local prev = redis.call('XREVRANGE', messages, '+', '-', 'COUNT', 1)
    if #prev > 0 then prev_ms = tonumber(string.match(prev[1][1], '^(%d+)')) end
  end
  local seq = string.format('%d', tonumber(st[3] or '0') + 1)
  -- `createdAt`: the node's clock (no `TIME` call), floored strictly after
  -- the previous message, so history (ids `<createdAt ms>-0`) stays ordered
  -- by it whatever the nodes' clocks say. The node sent its time formatted
  -- too; only a floored time is formatted here.
  local ms = tonumber(clock_ms)
  local created = clock_iso
  if prev_ms and prev_ms + 1 > ms then
    ms = prev_ms + 1
    created = iso_ms(ms)
  end
  local sid = string.format('%d-0', ms)
  local msg = message_0 .. '"' .. created .. '"' .. message_1 .. suppressed .. message_2
    .. seq .. message_3
  redis.call('XADD', messages, sid, 'i', message_id)
  redis.call('HSET', bodies, message_id, msg)
  redis.call('HSET', message_ids, message_id, sid)
  -- Posting reads everything before the post: the sender's marker goes in
  -- the state hash (`r:<participant>`), written with the counters; readers
  -- take the newer of it and the `reads` hash (explicit marks).
  redis.call('HSET', conversation_state, 'rounds', string.format('%d', rounds),
    'last_ms', string.format('%d', ms), 'seq', seq, 'r:' .. sender_id, seq .. ' ' .. message_id)
  if poll_id ~= '' then
    redis.call('HSET', polls, poll_id, conversation_id .. ' ' .. message_id)
  end
  if fingerprint ~= '' then
    redis.call('SET', idempotency, fingerprint .. ' ' .. conversation_id .. ' ' .. message_id,
      'PX', window_ms)
  end
  if not l then l = log_open(epoch, log_meta, epoch_candidate) end
  local id = log_add(l, log, event_0 .. msg .. event_1)
  return {'ok', id, string.format('%d', ms), suppressed, seq}
end

local answers = {}
local count = (#ARGV - 3) / ARGS_EACH
for i = 0, count - 1 do
  local done, answer = pcall(append_one, 10 + i * KEYS_EACH, 4 + i * ARGS_EACH)
  if not done then
    if type(answer) == 'table' then answer = answer.err end
    answer = {'failed', tostring(answer)}
  end
  answers[#answers + 1] = answer
end
if l then log_close(l, log, log_meta, rosters, window_ms, max_entries) end
return answers
