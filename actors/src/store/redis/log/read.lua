-- The full read. KEYS: `LogStateKeys` (log.rs); ARGV: `ReadLogArgs`
-- (tail.rs). → {epoch, last id, max deleted id, entries}; `entries`
-- (XRANGE after `after`, exclusive) is empty when the epoch differs. One
-- snapshot: no trim can fall between the state and the range.
local log, epoch, log_meta = unpack(KEYS)
local epoch_candidate, cursor_epoch, after, count = unpack(ARGV)
local current, last, maxdel = log_state(log, epoch, log_meta, epoch_candidate)
local entries = {}
if current == cursor_epoch and tonumber(count) > 0 then
  entries = redis.call('XRANGE', log, '(' .. after, '+', 'COUNT', count)
end
return {current, last, maxdel, entries}
