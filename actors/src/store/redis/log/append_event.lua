-- A control entry. KEYS and ARGV: `AppendEventKeys`, `AppendEventArgs`
-- (log.rs). → {'ok', entry id}
local log, epoch, log_meta, rosters = unpack(KEYS)
local epoch_candidate, window_ms, max_entries, event = unpack(ARGV)
local id = append_log(log, epoch, log_meta, rosters, epoch_candidate, window_ms, max_entries, event)
return {'ok', id}
