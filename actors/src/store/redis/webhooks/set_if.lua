-- Writes a webhook's position or status only while that webhook is still
-- the participant's, so a worker finishing late never touches a removed
-- or replaced webhook's state. KEYS and ARGV: `SetIfWebhookKeys` and
-- `SetIfWebhookArgs` (webhooks.rs). → 1 written, 0 not.
local webhooks, target = unpack(KEYS)
local participant_id, webhook, value = unpack(ARGV)

if redis.call('HGET', webhooks, participant_id) ~= webhook then return 0 end
redis.call('HSET', target, participant_id, value)
return 1
