-- KEYS: `HistoryKeys` (messages.rs). ARGV: message id.
-- → message JSON or nil.
local messages, message_ids, bodies = unpack(KEYS)
local message_id = ARGV[1]
local body = redis.call('HGET', bodies, message_id)
if body then return body end
local sid = redis.call('HGET', message_ids, message_id)
if not sid then return false end
local r = redis.call('XRANGE', messages, sid, sid)
if #r == 0 then return false end
return body_of(bodies, r[1][2]) or false
