-- Takes one call from a rate-limit bucket (protocol §11; GCRA: `burst`
-- calls, one more every `interval` µs). `key` holds the bucket's
-- "theoretical arrival time" in µs of the Redis clock (`TIME`, the only
-- clock, so node clock skew does not matter; ≈ 1.8e15, exact in a Lua
-- double, written with `%.0f` because `tostring` would round it to 14
-- digits) and expires when the bucket would be full again, so idle tokens
-- leave nothing behind. → false when the call was taken, else the wait in
-- µs until one would be (nothing written).
local function take_budget(key, interval, burst)
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
  local tat = tonumber(redis.call('GET', key)) or now
  if tat < now then tat = now end
  local new_tat = tat + interval
  local allow_at = new_tat - burst * interval
  if now < allow_at then return allow_at - now end
  redis.call('SET', key, string.format('%.0f', new_tat), 'PX',
    math.ceil((new_tat - now) / 1000) + 1)
  return false
end
