-- KEYS: conversations, revisions. ARGV: conversation id.
-- → {conversation JSON, revision} or {} when there is none. One
-- snapshot, so the revision is the one of that JSON.
local conversations, revisions = KEYS[1], KEYS[2]
local conversation_id = ARGV[1]
local json = redis.call('HGET', conversations, conversation_id)
if not json then return {} end
return {json, redis.call('HGET', revisions, conversation_id) or '0'}
