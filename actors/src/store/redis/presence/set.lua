-- Writes one node's presence record of a Bay: its heartbeat, and the
-- entries that changed since the node's last write. KEYS and ARGV:
-- `SetPresenceKeys` and `SetPresenceArgs` (presence.rs), then `removed`
-- participant ids whose entries go, then (participant id, entry JSON)
-- pairs to write.
-- → 1 written; 0 when `full` is '0' but the node had no heartbeat (its
-- record lapsed and a reader collected it, or the data set was lost):
-- nothing is written, and the caller writes the record whole.
local presence, record = unpack(KEYS)
local node, heartbeat, expire_ms, full, removed = unpack(ARGV, 1, 5)

local fresh = redis.call('HSET', presence, node, heartbeat)
if fresh == 1 and full ~= '1' then
  redis.call('HDEL', presence, node)
  return 0
end
if full == '1' then redis.call('DEL', record) end
local first = 6 + tonumber(removed)
for i = 6, first - 1 do
  redis.call('HDEL', record, ARGV[i])
end
for i = first, #ARGV, 2 do
  redis.call('HSET', record, ARGV[i], ARGV[i + 1])
end
redis.call('PEXPIRE', record, expire_ms)
return 1
