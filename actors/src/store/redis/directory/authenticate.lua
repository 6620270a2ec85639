-- KEYS: participant-tokens, participants, suspended. ARGV: participant id,
-- token hash. → {the participant's JSON, 1/0 participant suspended, 1/0
-- Bay suspended} when `token_hash` is its current token, else nil.
local participant_tokens, participants, suspended = KEYS[1], KEYS[2], KEYS[3]
local participant_id, token_hash = ARGV[1], ARGV[2]
if redis.call('HGET', participant_tokens, participant_id) ~= token_hash then return false end
local json = redis.call('HGET', participants, participant_id)
if not json then return false end
return {json, redis.call('SISMEMBER', suspended, participant_id),
  redis.call('SISMEMBER', suspended, '*')}
