//! The Lua scripts of the Redis engine. Each one runs atomically on the
//! server (Redis runs one script at a time), and each touches only keys of
//! one hash-tag slot, so they stay valid on Redis Cluster.
//!
//! Conventions: scripts never build JSON themselves beyond concatenating
//! pieces prepared in Rust (see `codec::Holes`), so no `cjson` round trip
//! can alter numbers or empty arrays in stored records. Scripts answer with
//! a status string first (`ok`, `missing`, `exists`, `conflict`, …) and
//! never put `nil` inside a table (it would truncate the reply).
//!
//! Every script that writes the log mints the epoch if it is missing
//! (`SET NX` of a fresh random candidate passed by the caller) — a missing
//! epoch means the Bay's data is new or was lost, and either way a new
//! incarnation of the log begins.

use redis::Script;
use std::sync::LazyLock;

/// Helpers shared by the scripts (prepended to each).
macro_rules! lib {
    () => {
        r#"
-- The JSON of a history entry's message: its body by id (`i`), or for
-- entries written before bodies were kept apart, the changed body if any,
-- else the JSON in the entry itself (`m`; the id is its first field).
local function body_of(bodies, fields)
  local id, inline
  for j = 1, #fields, 2 do
    if fields[j] == 'i' then id = fields[j + 1] elseif fields[j] == 'm' then inline = fields[j + 1] end
  end
  if not id and inline then id = string.match(inline, '^{"id":"([^"]+)"') end
  if id then
    local body = redis.call('HGET', bodies, id)
    if body then return body end
  end
  return inline
end

-- One step of the round counter (protocol §4; `next_round` in Rust): a
-- human resets it, an agent adds one and, under a cap (`''` for none),
-- is suppressed once the count reaches it. Returns the count and the flag.
local function round_step(rounds, kind, cap, suppressed)
  if kind ~= 'agent' then return 0, suppressed end
  rounds = rounds + 1
  if cap ~= '' then
    if rounds >= tonumber(cap) then suppressed = 'true' else suppressed = 'false' end
  end
  return rounds, suppressed
end

local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- Appends `event` to the log stream and keeps the log's meta hash current
-- (`last`, `maxdel`), so readers need no XINFO. Each entry also names its
-- epoch (`ep`) and the entry before it (`p`): a tail reading with XREAD
-- alone can tell that what it got follows its position unbroken. Trimming: entries older
-- than `window` ms go (exact MINID), checked at most once per `slack` ms
-- (window/16, at most 1 s; `next_trim` in the meta hash), so an entry may
-- outlive the window by that much but a steady append costs no range
-- scan; beyond `maxlen` entries they go at once (exact MAXLEN). The newest
-- trimmed id becomes `maxdel` (readers compare cursors against it) and the
-- stream's max-deleted-entry-id (XSETID), and the roster changes of the
-- trimmed entries go with them.
local function append_log(log, epoch, meta, rosters, candidate, window, maxlen, event)
  local ep = redis.call('SET', epoch, candidate, 'NX', 'GET') or candidate
  local prev = redis.call('HGET', meta, 'last') or '0-0'
  local id = redis.call('XADD', log, '*', 'e', event, 'p', prev, 'ep', ep)
  local trimmed = false
  local now = now_ms()
  local due = redis.call('HGET', meta, 'next_trim')
  if (not due) or now >= tonumber(due) then
    local minid = now - tonumber(window)
    if minid > 0 then
      local bound = string.format('%d-0', minid)
      local doomed = redis.call('XREVRANGE', log, '(' .. bound, '-', 'COUNT', 1)
      if #doomed > 0 then
        trimmed = doomed[1][1]
        redis.call('XTRIM', log, 'MINID', '=', bound)
      end
    end
    local oldest = redis.call('XRANGE', log, '-', '+', 'COUNT', 1)
    local oldest_ms = tonumber(string.match(oldest[1][1], '^(%d+)'))
    local slack = math.min(1000, math.max(1, math.floor(tonumber(window) / 16)))
    redis.call('HSET', meta, 'next_trim',
      string.format('%d', math.max(oldest_ms + tonumber(window), now + slack)))
  end
  local excess = redis.call('XLEN', log) - tonumber(maxlen)
  if excess > 0 then
    local doomed = redis.call('XRANGE', log, '-', '+', 'COUNT', excess)
    trimmed = doomed[#doomed][1]
    redis.call('XTRIM', log, 'MAXLEN', '=', maxlen)
  end
  if trimmed then
    redis.call('XSETID', log, id, 'MAXDELETEDID', trimmed)
    local first = redis.call('XRANGE', log, '-', '+', 'COUNT', 1)
    redis.call('XTRIM', rosters, 'MINID', '=', first[1][1])
    redis.call('HSET', meta, 'last', id, 'maxdel', trimmed)
  else
    redis.call('HSET', meta, 'last', id)
  end
  return id
end

-- RFC 3339 UTC with milliseconds ("2026-11-30T12:00:00.123Z") of a Unix
-- time in milliseconds: what chrono writes and reads for `createdAt`.
local function iso_ms(ms)
  local secs = math.floor(ms / 1000)
  local milli = ms - secs * 1000
  local days = math.floor(secs / 86400)
  local sod = secs - days * 86400
  -- civil_from_days (H. Hinnant), valid for the proleptic Gregorian calendar
  local z = days + 719468
  local era = math.floor(z / 146097)
  local doe = z - era * 146097
  local yoe = math.floor((doe - math.floor(doe / 1460) + math.floor(doe / 36524)
    - math.floor(doe / 146096)) / 365)
  local y = yoe + era * 400
  local doy = doe - (365 * yoe + math.floor(yoe / 4) - math.floor(yoe / 100))
  local mp = math.floor((5 * doy + 2) / 153)
  local d = doy - math.floor((153 * mp + 2) / 5) + 1
  local m
  if mp < 10 then m = mp + 3 else m = mp - 9 end
  if m <= 2 then y = y + 1 end
  return string.format('%04d-%02d-%02dT%02d:%02d:%02d.%03dZ', y, m, d,
    math.floor(sod / 3600), math.floor((sod % 3600) / 60), sod % 60, milli)
end

-- The epoch (minted if missing), the log's last generated id and newest
-- trimmed id ("0-0" for a log that has none yet), from the meta hash.
local function log_state(log, epoch, meta, candidate)
  local current = redis.call('SET', epoch, candidate, 'NX', 'GET') or candidate
  local m = redis.call('HMGET', meta, 'last', 'maxdel')
  if (not m[1]) and redis.call('EXISTS', log) == 1 then
    -- A log written before the meta hash existed: ask the stream once.
    local info = redis.call('XINFO', 'STREAM', log)
    for i = 1, #info, 2 do
      if info[i] == 'last-generated-id' then
        m[1] = info[i + 1]
      elseif info[i] == 'max-deleted-entry-id' then
        m[2] = info[i + 1]
      end
    end
    redis.call('HSET', meta, 'last', m[1], 'maxdel', m[2] or '0-0')
  end
  return current, m[1] or '0-0', m[2] or '0-0'
end
"#
    };
}

/// KEYS: log, epoch, log-meta, rosters. ARGV: epoch candidate, window ms,
/// maxlen, event JSON. → `{'ok', id}`
pub static APPEND_EVENT: LazyLock<Script> = LazyLock::new(|| {
    Script::new(concat!(
        lib!(),
        r#"
local id = append_log(KEYS[1], KEYS[2], KEYS[3], KEYS[4], ARGV[1], ARGV[2], ARGV[3], ARGV[4])
return {'ok', id}
"#
    ))
});

/// KEYS: log, epoch, log-meta. ARGV: epoch candidate. → `{epoch, last id}`
pub static LOG_HEAD: LazyLock<Script> = LazyLock::new(|| {
    Script::new(concat!(
        lib!(),
        r#"
local epoch, last = log_state(KEYS[1], KEYS[2], KEYS[3], ARGV[1])
return {epoch, last}
"#
    ))
});

/// KEYS: log, epoch, log-meta. ARGV: epoch candidate, cursor epoch, after id, count.
/// → `{epoch, last id, max deleted id, entries}`; `entries` (XRANGE after
/// `after`, exclusive) is empty when the epoch differs. One snapshot: no
/// trim can fall between the state and the range.
pub static READ_LOG: LazyLock<Script> = LazyLock::new(|| {
    Script::new(concat!(
        lib!(),
        r#"
local epoch, last, maxdel = log_state(KEYS[1], KEYS[2], KEYS[3], ARGV[1])
local entries = {}
if epoch == ARGV[2] and tonumber(ARGV[4]) > 0 then
  entries = redis.call('XRANGE', KEYS[1], '(' .. ARGV[3], '+', 'COUNT', ARGV[4])
end
return {epoch, last, maxdel, entries}
"#
    ))
});

/// KEYS: 1 convs, 2 revisions, 3 state, 4 msgs, 5 ids, 6 log, 7 epoch,
/// 8 log-meta, 9 rosters, 10 bodies, 11 reads, 12 polls, 13 idempotency.
/// ARGV: 1 conversation id, 2 message id, 3 sender kind (`user`/`agent`),
/// 4 round cap (`''` = none), 5 given `suppressed`, 6–9 message JSON
/// pieces around `createdAt`, `routing.suppressed` and `seq`, 10–11 log
/// event pieces around the message, 12 epoch candidate, 13 window ms,
/// 14 maxlen, 15 revision routed with, 16 idempotency fingerprint (`''` =
/// none), 17 poll id (`''` = none), 18 sender id.
/// → `{'ok', log id, createdAt ms, suppressed, seq}`, `{'stale'}`,
/// `{'missing'}`, `{'exists', first message JSON}` (an idempotent
/// retry) or `{'conflict'}` (the key was used for another request).
pub static APPEND_MESSAGE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(concat!(
        lib!(),
        r#"
local rev = redis.call('HGET', KEYS[2], ARGV[1])
if not rev then
  if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then return {'missing'} end
  rev = '0'
end
if rev ~= ARGV[15] then return {'stale'} end
if ARGV[16] ~= '' then
  local seen = redis.call('GET', KEYS[13])
  if seen then
    local fp, mid = string.match(seen, '^(%S+) %S+ (%S+)$')
    if fp ~= ARGV[16] then return {'conflict'} end
    -- The fingerprint covers the conversation: the first message is here.
    return {'exists', redis.call('HGET', KEYS[10], mid) or ''}
  end
end
local st = redis.call('HMGET', KEYS[3], 'rounds', 'last_ms', 'seq')
local rounds = tonumber(st[1] or '0')
local suppressed = ARGV[5]
if ARGV[19] ~= '' then
  -- A draft: the round cap applies at completion. Its text so far lives
  -- apart, so appends are APPENDs; the sweep index notes its author.
  redis.call('SET', KEYS[14], ARGV[20])
  redis.call('ZADD', KEYS[15], now_ms(), ARGV[2])
  redis.call('HSET', KEYS[16], ARGV[2], ARGV[1] .. ' ' .. ARGV[19])
else
  rounds, suppressed = round_step(rounds, ARGV[3], ARGV[4], suppressed)
end
local prev_ms = tonumber(st[2])
if not prev_ms then
  -- History written before the state hash existed.
  local prev = redis.call('XREVRANGE', KEYS[4], '+', '-', 'COUNT', 1)
  if #prev > 0 then prev_ms = tonumber(string.match(prev[1][1], '^(%d+)')) end
end
local seq = string.format('%d', tonumber(st[3] or '0') + 1)
local ms = now_ms()
if prev_ms and prev_ms + 1 > ms then ms = prev_ms + 1 end
local sid = string.format('%d-0', ms)
local msg = ARGV[6] .. '"' .. iso_ms(ms) .. '"' .. ARGV[7] .. suppressed .. ARGV[8] .. seq .. ARGV[9]
redis.call('XADD', KEYS[4], sid, 'i', ARGV[2])
redis.call('HSET', KEYS[10], ARGV[2], msg)
redis.call('HSET', KEYS[5], ARGV[2], sid)
redis.call('HSET', KEYS[3], 'rounds', string.format('%d', rounds), 'last_ms', string.format('%d', ms), 'seq', seq)
-- Posting reads everything before the post.
redis.call('HSET', KEYS[11], ARGV[18], seq .. ' ' .. ARGV[2])
if ARGV[17] ~= '' then redis.call('HSET', KEYS[12], ARGV[17], ARGV[1] .. ' ' .. ARGV[2]) end
if ARGV[16] ~= '' then
  redis.call('SET', KEYS[13], ARGV[16] .. ' ' .. ARGV[1] .. ' ' .. ARGV[2], 'PX', ARGV[13])
end
local id = append_log(KEYS[6], KEYS[7], KEYS[8], KEYS[9], ARGV[12], ARGV[13], ARGV[14],
  ARGV[10] .. msg .. ARGV[11])
return {'ok', id, string.format('%d', ms), suppressed, seq}
"#
    ))
});

/// KEYS: 1 convs, 2 revisions, 3 ids, 4 versions, 5 bodies, 6 log,
/// 7 epoch, 8 log-meta, 9 rosters. ARGV: 1 conversation id, 2 message id,
/// 3 revision the change was authorized with, 4 the new version, 5 the
/// message JSON after the change, 6 the log event JSON, 7 epoch
/// candidate, 8 window ms, 9 maxlen.
/// → `{'ok', log id}`, `{'stale'}`, `{'conflict'}` (the message is not
/// at version − 1) or `{'missing'}`.
pub static CHANGE_MESSAGE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(concat!(
        lib!(),
        r#"
local rev = redis.call('HGET', KEYS[2], ARGV[1])
if not rev then
  if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then return {'missing'} end
  rev = '0'
end
if rev ~= ARGV[3] then return {'stale'} end
if redis.call('HEXISTS', KEYS[3], ARGV[2]) == 0 then return {'missing'} end
local version = tonumber(redis.call('HGET', KEYS[4], ARGV[2]) or '0')
if version + 1 ~= tonumber(ARGV[4]) then return {'conflict'} end
redis.call('HSET', KEYS[4], ARGV[2], ARGV[4])
redis.call('HSET', KEYS[5], ARGV[2], ARGV[5])
local id = append_log(KEYS[6], KEYS[7], KEYS[8], KEYS[9], ARGV[7], ARGV[8], ARGV[9], ARGV[6])
return {'ok', id}
"#
    ))
});

/// KEYS: 1 reads, 2 log, 3 epoch, 4 log-meta, 5 rosters, 6 convs. ARGV:
/// 1 participant id, 2 the message's seq, 3 its id, 4 the `read.updated`
/// log event JSON, 5 conversation id, 6 epoch candidate, 7 window ms,
/// 8 maxlen. → `{'ok', log id}`, `{'missing'}` (no such conversation), or
/// `{'exists'}` when the marker already was at or past that message
/// (nothing logged).
pub static MARK_READ: LazyLock<Script> = LazyLock::new(|| {
    Script::new(concat!(
        lib!(),
        r#"
if redis.call('HEXISTS', KEYS[6], ARGV[5]) == 0 then return {'missing'} end
local cur = redis.call('HGET', KEYS[1], ARGV[1])
if cur and tonumber(string.match(cur, '^(%d+)')) >= tonumber(ARGV[2]) then
  return {'exists'}
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2] .. ' ' .. ARGV[3])
local id = append_log(KEYS[2], KEYS[3], KEYS[4], KEYS[5], ARGV[6], ARGV[7], ARGV[8], ARGV[4])
return {'ok', id}
"#
    ))
});

/// KEYS: 1 log, 2 epoch, 3 log-meta, 4 rosters, 5 presence-states.
/// ARGV: 1 epoch candidate, 2 window ms, 3 maxlen, then per change four
/// values: participant id, the state it was computed against, the new
/// state (`offline` removes the participant), the `Presence` log event
/// JSON. Compare-and-set: when any participant's published state is not
/// the expected one, nothing is written. → `{'ok', id...}` or
/// `{'conflict'}`.
pub static PUBLISH_PRESENCE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(concat!(
        lib!(),
        r#"
for i = 4, #ARGV, 4 do
  local cur = redis.call('HGET', KEYS[5], ARGV[i]) or 'offline'
  if cur ~= ARGV[i + 1] then return {'conflict'} end
end
local out = {'ok'}
for i = 4, #ARGV, 4 do
  if ARGV[i + 2] == 'offline' then
    redis.call('HDEL', KEYS[5], ARGV[i])
  else
    redis.call('HSET', KEYS[5], ARGV[i], ARGV[i + 2])
  end
  table.insert(out, append_log(KEYS[1], KEYS[2], KEYS[3], KEYS[4], ARGV[1], ARGV[2], ARGV[3], ARGV[i + 3]))
end
return out
"#
    ))
});

/// KEYS: the lease. ARGV: holder, ttl ms. → 1 when the holder has the
/// lease now (taken or renewed), else 0.
pub static LEASE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r#"
local cur = redis.call('GET', KEYS[1])
if cur and cur ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1
"#,
    )
});

/// KEYS: the lease. ARGV: holder. Deletes the lease if the holder has it.
pub static RELEASE_LEASE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r#"
if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) end
return 1
"#,
    )
});

/// KEYS: webhooks, webhook-positions, webhook-status. ARGV: participant
/// id, webhook JSON (`''` removes it, keeping its last status so the
/// owner can see why it stopped), the delivery position to start at.
pub static SET_WEBHOOK: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r#"
if ARGV[2] == '' then
  redis.call('HDEL', KEYS[1], ARGV[1])
  redis.call('HDEL', KEYS[2], ARGV[1])
else
  redis.call('HDEL', KEYS[3], ARGV[1])
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
  redis.call('HSET', KEYS[2], ARGV[1], ARGV[3])
end
return 1
"#,
    )
});

/// KEYS: webhooks, and the hash to write (positions or status). ARGV:
/// participant id, the webhook JSON the writer works for, value. Writes
/// only while that webhook is still the participant's, so a worker
/// finishing late never touches a removed or replaced webhook's state.
pub static SET_IF_WEBHOOK: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r#"
if redis.call('HGET', KEYS[1], ARGV[1]) ~= ARGV[2] then return 0 end
redis.call('HSET', KEYS[2], ARGV[1], ARGV[3])
return 1
"#,
    )
});

/// KEYS: webhooks, webhook-positions, webhook-status. ARGV: participant
/// id, the webhook JSON to remove, the status JSON to record. Removes the
/// webhook only while it is still that one (a 410 from a replaced URL
/// must not remove its successor).
pub static DISABLE_WEBHOOK: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r#"
if redis.call('HGET', KEYS[1], ARGV[1]) ~= ARGV[2] then return 0 end
redis.call('HDEL', KEYS[1], ARGV[1])
redis.call('HDEL', KEYS[2], ARGV[1])
redis.call('HSET', KEYS[3], ARGV[1], ARGV[3])
return 1
"#,
    )
});

/// KEYS: state and reads of each conversation, in pairs. ARGV: participant
/// id. → per conversation: the newest `seq` and the participant's marker
/// (`"<seq> <message id>"`, or `''`).
pub static READ_STATES: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r#"
local out = {}
for i = 1, #KEYS, 2 do
  table.insert(out, redis.call('HGET', KEYS[i], 'seq') or '0')
  table.insert(out, redis.call('HGET', KEYS[i + 1], ARGV[1]) or '')
end
return out
"#,
    )
});

/// KEYS: convs, revisions. ARGV: conversation id.
/// → `{conversation JSON, revision}` or `{}` when there is none. One
/// snapshot, so the revision is the one of that JSON.
pub static CONVERSATION_REVISIONED: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r#"
local json = redis.call('HGET', KEYS[1], ARGV[1])
if not json then return {} end
return {json, redis.call('HGET', KEYS[2], ARGV[1]) or '0'}
"#,
    )
});

/// KEYS: msgs, ids, bodies. ARGV: message id. → message JSON or nil.
pub static MESSAGE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(concat!(
        lib!(),
        r#"
local body = redis.call('HGET', KEYS[3], ARGV[1])
if body then return body end
local sid = redis.call('HGET', KEYS[2], ARGV[1])
if not sid then return false end
local r = redis.call('XRANGE', KEYS[1], sid, sid)
if #r == 0 then return false end
return body_of(KEYS[3], r[1][2]) or false
"#
    ))
});

/// KEYS: msgs, bodies. ARGV: first stream id (inclusive, or `-`), count.
/// → message JSONs, oldest first.
pub static MESSAGES_SINCE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(concat!(
        lib!(),
        r#"
local out = {}
for _, e in ipairs(redis.call('XRANGE', KEYS[1], ARGV[1], '+', 'COUNT', ARGV[2])) do
  local body = body_of(KEYS[2], e[2])
  if body then table.insert(out, body) end
end
return out
"#
    ))
});

/// KEYS: msgs, ids, bodies. ARGV: before message id (`''` = none), limit.
/// → `{has_more (0/1), json...}` newest first: the `limit` messages before
/// `before` (or the newest), and whether older ones remain. An unknown
/// `before` gives nothing.
pub static MESSAGES_BEFORE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(concat!(
        lib!(),
        r#"
local limit = tonumber(ARGV[2])
local start = '+'
if ARGV[1] ~= '' then
  local sid = redis.call('HGET', KEYS[2], ARGV[1])
  if not sid then return {0} end
  start = '(' .. sid
end
local r = redis.call('XREVRANGE', KEYS[1], start, '-', 'COUNT', limit + 1)
local out = {0}
if #r > limit then out[1] = 1 end
for i = 1, math.min(#r, limit) do
  local body = body_of(KEYS[3], r[i][2])
  if body then table.insert(out, body) end
end
return out
"#
    ))
});

/// KEYS: bay, participants, participant-tokens.
/// ARGV: participant id, participant JSON, token hash.
/// → `{'ok'}`, `{'nobay'}` or `{'exists'}`
pub static CREATE_PARTICIPANT: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r#"
if redis.call('EXISTS', KEYS[1]) == 0 then return {'nobay'} end
if redis.call('HEXISTS', KEYS[2], ARGV[1]) == 1 then return {'exists'} end
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
redis.call('HSET', KEYS[3], ARGV[1], ARGV[3])
return {'ok'}
"#,
    )
});

/// KEYS: participants, participant-tokens, log, epoch, log-meta, rosters.
/// ARGV: 1 participant id, 2 new token hash (`''` = revoke), 3 epoch
/// candidate, 4 window ms, 5 maxlen, 6–7 `CredentialRevoked` JSON pieces
/// around the token-id hole.
/// → `{'ok', old hash or ''}` or `{'missing'}`. The revocation is logged
/// (when there was an old token) in the same step as the swap.
pub static SET_TOKEN: LazyLock<Script> = LazyLock::new(|| {
    Script::new(concat!(
        lib!(),
        r#"
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then return {'missing'} end
local old = redis.call('HGET', KEYS[2], ARGV[1])
if ARGV[2] == '' then
  redis.call('HDEL', KEYS[2], ARGV[1])
else
  redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
end
if not old then return {'ok', ''} end
append_log(KEYS[3], KEYS[4], KEYS[5], KEYS[6], ARGV[3], ARGV[4], ARGV[5],
  ARGV[6] .. '"' .. string.sub(old, 1, 16) .. '"' .. ARGV[7])
return {'ok', old}
"#
    ))
});

/// KEYS: participant-tokens, participants. ARGV: participant id, token hash.
/// → participant JSON when `hash` is that participant's current token, else nil.
pub static AUTHENTICATE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r#"
if redis.call('HGET', KEYS[1], ARGV[1]) ~= ARGV[2] then return false end
return redis.call('HGET', KEYS[2], ARGV[1])
"#,
    )
});

/// KEYS: token index key. ARGV: expected current value (`''` = absent), new value.
/// → 1 when swapped, 0 when the key held something else.
pub static TOKEN_CLAIM: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r#"
local cur = redis.call('GET', KEYS[1])
if (not cur and ARGV[1] == '') or cur == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[2])
  return 1
end
return 0
"#,
    )
});

/// KEYS: token index key. ARGV: expected value. Deletes the key only when
/// it still holds `expected`. → 1 deleted, 0 not.
pub static TOKEN_RELEASE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r#"
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
"#,
    )
});

/// KEYS: bay, conversations, revisions, log, epoch, log-meta, rosters.
/// ARGV: 1 conversation id, 2 conversation JSON, 3 roster event JSON,
/// 4 epoch candidate, 5 window ms, 6 maxlen, 7 roster change JSON,
/// 8 the new revision.
/// → `{'ok', entry id}`, `{'nobay'}` or `{'exists'}`.
pub static CREATE_CONVERSATION: LazyLock<Script> = LazyLock::new(|| {
    Script::new(concat!(
        lib!(),
        r#"
if redis.call('EXISTS', KEYS[1]) == 0 then return {'nobay'} end
if redis.call('HEXISTS', KEYS[2], ARGV[1]) == 1 then return {'exists'} end
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
redis.call('HSET', KEYS[3], ARGV[1], ARGV[8])
local id = append_log(KEYS[4], KEYS[5], KEYS[6], KEYS[7], ARGV[4], ARGV[5], ARGV[6], ARGV[3])
redis.call('XADD', KEYS[7], id, 'r', ARGV[7])
return {'ok', id}
"#
    ))
});

/// KEYS: conversations, revisions, log, epoch, log-meta, rosters.
/// ARGV: 1 conversation id, 2 expected current JSON, 3 new JSON, 4 roster
/// event JSON, 5 epoch candidate, 6 window ms, 7 maxlen, 8 roster change
/// JSON (the members before), 9 the new revision.
/// Compare-and-set: the change (made in Rust on the JSON read) applies only
/// if nobody changed the conversation since; the roster entry, the roster
/// change and the new revision happen in the same step.
/// → `{'ok', entry id}`, `{'missing'}` or `{'conflict'}`
pub static CHANGE_CONVERSATION: LazyLock<Script> = LazyLock::new(|| {
    Script::new(concat!(
        lib!(),
        r#"
local cur = redis.call('HGET', KEYS[1], ARGV[1])
if not cur then return {'missing'} end
if cur ~= ARGV[2] then return {'conflict'} end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
redis.call('HSET', KEYS[2], ARGV[1], ARGV[9])
local id = append_log(KEYS[3], KEYS[4], KEYS[5], KEYS[6], ARGV[5], ARGV[6], ARGV[7], ARGV[4])
redis.call('XADD', KEYS[6], id, 'r', ARGV[8])
return {'ok', id}
"#
    ))
});

/// ARGV: Unix ms. → `iso_ms(ms)`. Lets a test check the Lua date formatter
/// against chrono on awkward dates.
pub static FORMAT_MS: LazyLock<Script> = LazyLock::new(|| {
    Script::new(concat!(
        lib!(),
        r#"
return iso_ms(tonumber(ARGV[1]))
"#
    ))
});

/// Appends one flush window's text to an open draft and logs the
/// `message.delta`, if the draft is open and at the expected version.
///
/// KEYS: versions, draft text, drafts (sweep index), log, epoch, log-meta,
/// rosters, conversations, revisions.
/// ARGV: message id, expected version, text, event JSON, epoch candidate,
/// window ms, max entries, conversation id, revision.
/// Reply: `{'ok', <entry id>, <new version>}`, `{'closed'}`, `{'conflict'}`,
/// `{'stale'}`, `{'missing'}`.
pub static APPEND_DRAFT: LazyLock<Script> = LazyLock::new(|| {
    Script::new(concat!(
        lib!(),
        r#"
local rev = redis.call('HGET', KEYS[9], ARGV[8])
if not rev then
  if redis.call('HEXISTS', KEYS[8], ARGV[8]) == 0 then return {'missing'} end
  rev = '0'
end
if rev ~= ARGV[9] then return {'stale'} end
if not redis.call('ZSCORE', KEYS[3], ARGV[1]) then return {'closed'} end
local version = tonumber(redis.call('HGET', KEYS[1], ARGV[1]) or '0')
if version ~= tonumber(ARGV[2]) then return {'conflict'} end
local next = string.format('%d', version + 1)
redis.call('HSET', KEYS[1], ARGV[1], next)
redis.call('APPEND', KEYS[2], ARGV[3])
redis.call('ZADD', KEYS[3], now_ms(), ARGV[1])
local id = append_log(KEYS[4], KEYS[5], KEYS[6], KEYS[7], ARGV[5], ARGV[6], ARGV[7], ARGV[4])
return {'ok', id, next}
"#
    ))
});

/// Ends an open draft: stores its final body, logs the change and drops
/// the draft's text and index entries; with a round step, applies the
/// round cap like `APPEND_MESSAGE` and picks the body and event written
/// with the resulting `suppressed` flag.
///
/// KEYS: conversations, revisions, message ids, versions, bodies, log,
/// epoch, log-meta, rosters, conversation state, draft text, drafts,
/// draft-info.
/// ARGV: conversation id, message id, revision, new version, body
/// (suppressed false), event (false), epoch candidate, window ms, max
/// entries, sender kind (`user`/`agent`, or `''` for no round step), cap
/// (`''` for none), body (suppressed true), event (true), given suppressed.
/// Reply: `{'ok', <entry id>, 'true'|'false'}`, `{'stale'}`, `{'conflict'}`,
/// `{'missing'}`.
pub static CLOSE_DRAFT: LazyLock<Script> = LazyLock::new(|| {
    Script::new(concat!(
        lib!(),
        r#"
local rev = redis.call('HGET', KEYS[2], ARGV[1])
if not rev then
  if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then return {'missing'} end
  rev = '0'
end
if rev ~= ARGV[3] then return {'stale'} end
if redis.call('HEXISTS', KEYS[3], ARGV[2]) == 0 then return {'missing'} end
if not redis.call('ZSCORE', KEYS[12], ARGV[2]) then return {'conflict'} end
local version = tonumber(redis.call('HGET', KEYS[4], ARGV[2]) or '0')
if version + 1 ~= tonumber(ARGV[4]) then return {'conflict'} end
local suppressed = ARGV[14]
if ARGV[10] ~= '' then
  local rounds = tonumber(redis.call('HGET', KEYS[10], 'rounds') or '0')
  rounds, suppressed = round_step(rounds, ARGV[10], ARGV[11], suppressed)
  redis.call('HSET', KEYS[10], 'rounds', string.format('%d', rounds))
end
local body, event = ARGV[5], ARGV[6]
if ARGV[10] ~= '' and suppressed == 'true' then body, event = ARGV[12], ARGV[13] end
redis.call('HSET', KEYS[4], ARGV[2], ARGV[4])
redis.call('HSET', KEYS[5], ARGV[2], body)
redis.call('DEL', KEYS[11])
redis.call('ZREM', KEYS[12], ARGV[2])
redis.call('HDEL', KEYS[13], ARGV[2])
local id = append_log(KEYS[6], KEYS[7], KEYS[8], KEYS[9], ARGV[7], ARGV[8], ARGV[9], event)
return {'ok', id, suppressed}
"#
    ))
});

/// An open draft's text so far and version.
///
/// KEYS: draft text, versions. ARGV: message id.
/// Reply: `{<text or false>, <version or false>}`.
pub static DRAFT_STATE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r#"
return {redis.call('GET', KEYS[1]), redis.call('HGET', KEYS[2], ARGV[1])}
"#,
    )
});

/// Whether `script` changes nothing a client could observe twice, so it
/// may be retried after a broken connection. The log readers only mint a
/// missing epoch (`SET NX`) and fill the meta hash, both idempotent.
pub fn is_read_only(script: &Script) -> bool {
    [
        &*READ_LOG,
        &*LOG_HEAD,
        &*AUTHENTICATE,
        &*MESSAGE,
        &*MESSAGES_BEFORE,
        &*MESSAGES_SINCE,
        &*READ_STATES,
        &*CONVERSATION_REVISIONED,
        &*DRAFT_STATE,
    ]
    .iter()
    .any(|s| s.get_hash() == script.get_hash())
}
