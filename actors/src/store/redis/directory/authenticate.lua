-- KEYS: participant-tokens, participants. ARGV: participant id, token
-- hash. → the participant's JSON when `token_hash` is its current token,
-- else nil.
local participant_tokens, participants = KEYS[1], KEYS[2]
local participant_id, token_hash = ARGV[1], ARGV[2]
if redis.call('HGET', participant_tokens, participant_id) ~= token_hash then return false end
return redis.call('HGET', participants, participant_id)
