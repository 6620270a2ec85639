-- Removes a webhook only while it is still the one given (a 410 from a
-- replaced URL must not remove its successor), recording its status.
-- KEYS and ARGV: `WebhookKeys` and `DisableWebhookArgs` (webhooks.rs).
-- → 1 removed, 0 not.
local webhooks, webhook_positions, webhook_status = unpack(KEYS)
local participant_id, webhook, status = unpack(ARGV)

if redis.call('HGET', webhooks, participant_id) ~= webhook then return 0 end
redis.call('HDEL', webhooks, participant_id)
redis.call('HDEL', webhook_positions, participant_id)
redis.call('HSET', webhook_status, participant_id, status)
return 1
