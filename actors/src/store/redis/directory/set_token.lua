-- Swaps a participant's token (`token_hash` '' revokes it) and, when
-- there was an old one, logs its `CredentialRevoked` in the same step,
-- and publishes `change` on the credentials channel when its key is
-- given (`credentials`: absent where it lives in another slot, on a Redis
-- Cluster; the caller then publishes right after).
-- KEYS and ARGV: `SetTokenKeys` and `SetTokenArgs` (directory.rs); the
-- event is `revoked_0 .. "<old token id>" .. revoked_1`, the token id
-- being the first 16 hex digits of the old hash.
-- → {'ok', old hash or ''} or {'missing'}
local participants, participant_tokens, log, epoch, log_meta, rosters, credentials = unpack(KEYS)
local participant_id, token_hash, epoch_candidate, window_ms, max_entries, revoked_0,
  revoked_1, kept, change = unpack(ARGV)

if redis.call('HEXISTS', participants, participant_id) == 0 then return {'missing'} end
local old = redis.call('HGET', participant_tokens, participant_id)
if token_hash == '' then
  redis.call('HDEL', participant_tokens, participant_id)
else
  redis.call('HSET', participant_tokens, participant_id, token_hash)
end
if not old then return {'ok', ''} end
append_log(log, epoch, log_meta, rosters, epoch_candidate, window_ms, max_entries,
  revoked_0 .. '"' .. string.sub(old, 1, 16) .. '"' .. revoked_1)
if credentials then publish_credentials(credentials, kept, change) end
return {'ok', old}
