-- The Redis clock in Unix ms (`TIME`): what the draft index's last activity
-- and the `createdAt` of writes other than plain appends are measured in.
-- (A plain append floors the node's clock instead, messages/append.lua;
-- trimming reads the new log entry's id, which is the Redis clock already.)
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- `append_log` appends `event` to the log stream and keeps the log's meta hash current
-- (`last`, `maxdel`), so readers need no XINFO. Each entry also names its
-- epoch (`ep`) and the entry before it (`p`): a tail reading with XREAD
-- alone can tell that what it got follows its position unbroken. Trimming: entries older
-- than `window` ms go (exact MINID), checked at most once per `slack` ms
-- (window/16, at most 1 s; `next_trim` in the meta hash), so an entry may
-- outlive the window by that much but a steady append costs no range
-- scan (the time is the new entry's id: `XADD *` stamped it with the
-- Redis clock, so no `TIME` call); beyond `maxlen` entries they go at once (exact MAXLEN). The newest
-- trimmed id becomes `maxdel` (readers compare cursors against it) and the
-- stream's max-deleted-entry-id (XSETID), and the roster changes of the
-- trimmed entries go with them. The epoch is minted (`SET NX` of the
-- caller's fresh `candidate`) when it is missing: the Bay's data is new or
-- was lost, and either way a new incarnation of the log begins. The meta
-- hash keeps a copy (`ep`), written with `last` by the append that first
-- asked the epoch key, so later appends read it with `last` and
-- `next_trim` (both keys live and go together: one slot, never deleted
-- apart).
--
-- `append_log` is three steps, so a batch (messages/append.lua) reads and
-- writes the meta hash, mints the epoch and checks the trim once for all
-- its entries:
-- `log_open` reads the meta hash (and mints the epoch when missing),
-- `log_add` appends one entry chained to the one before it, and
-- `log_close` trims and writes `last` (nothing when nothing was added).
local function log_open(epoch, meta, candidate)
  local m = redis.call('HMGET', meta, 'last', 'next_trim', 'ep')
  local l = {prev = m[1] or '0-0', due = m[2], ep = m[3], keep_ep = {}, added = false}
  if not l.ep then
    l.ep = redis.call('SET', epoch, candidate, 'NX', 'GET') or candidate
    l.keep_ep = {'ep', l.ep}
  end
  return l
end

local function log_add(l, log, event)
  local id = redis.call('XADD', log, '*', 'e', event, 'p', l.prev, 'ep', l.ep)
  l.prev = id
  l.added = true
  return id
end

local function log_close(l, log, meta, rosters, window, maxlen)
  if not l.added then return end
  local id = l.prev
  local trimmed = false
  local now = tonumber(string.match(id, '^(%d+)'))
  if (not l.due) or now >= tonumber(l.due) then
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
    redis.call('HSET', meta, 'last', id, 'maxdel', trimmed, unpack(l.keep_ep))
  else
    redis.call('HSET', meta, 'last', id, unpack(l.keep_ep))
  end
end

local function append_log(log, epoch, meta, rosters, candidate, window, maxlen, event)
  local l = log_open(epoch, meta, candidate)
  local id = log_add(l, log, event)
  log_close(l, log, meta, rosters, window, maxlen)
  return id
end
