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
