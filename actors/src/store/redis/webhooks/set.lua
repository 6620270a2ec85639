-- Sets or removes a participant's webhook. KEYS and ARGV: `WebhookKeys`
-- and `SetWebhookArgs` (webhooks.rs); `webhook` '' removes it, keeping its
-- last status so the owner can see why it stopped.
local webhooks, webhook_positions, webhook_status = unpack(KEYS)
local participant_id, webhook, position = unpack(ARGV)

if webhook == '' then
  redis.call('HDEL', webhooks, participant_id)
  redis.call('HDEL', webhook_positions, participant_id)
else
  redis.call('HDEL', webhook_status, participant_id)
  redis.call('HSET', webhooks, participant_id, webhook)
  redis.call('HSET', webhook_positions, participant_id, position)
end
return 1
