-- Creates a participant with its token, in the Bay's slot. KEYS and ARGV:
-- `CreateParticipantKeys` and `CreateParticipantArgs` (directory.rs).
-- → {'ok'}, {'nobay'} or {'exists'}
local bay, participants, participant_tokens = unpack(KEYS)
local participant_id, participant, token_hash = unpack(ARGV)

if redis.call('EXISTS', bay) == 0 then return {'nobay'} end
if redis.call('HEXISTS', participants, participant_id) == 1 then return {'exists'} end
redis.call('HSET', participants, participant_id, participant)
redis.call('HSET', participant_tokens, participant_id, token_hash)
return {'ok'}
