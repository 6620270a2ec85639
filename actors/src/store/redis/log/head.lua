-- The log's head. KEYS: `LogStateKeys` (log.rs); ARGV: an epoch
-- candidate. → {epoch, last id}
local log, epoch, log_meta = unpack(KEYS)
local epoch_candidate = ARGV[1]
local current, last = log_state(log, epoch, log_meta, epoch_candidate)
return {current, last}
