-- Takes one call from a rate-limit bucket (protocol §11; GCRA: `burst`
-- calls, one more every `interval` µs). `key` holds the bucket's
-- "theoretical arrival time" in µs of the Redis clock (`TIME`, the only
-- clock, so node clock skew does not matter; ≈ 1.8e15, exact in a Lua
-- double, written with `%.0f` because `tostring` would round it to 14
-- digits) and expires when the bucket would be full again, so idle tokens
-- leave nothing behind. → false when the call was taken, else the wait in
-- µs until one would be (nothing written). `now` (µs of the Redis clock)
-- may be passed by a script that takes several calls at once (the batched
-- append reads `TIME` once); else it is read here.
local function take_budget(key, interval, burst, now)
  if not now then
    local t = redis.call('TIME')
    now = tonumber(t[1]) * 1000000 + tonumber(t[2])
  end
  local tat = tonumber(redis.call('GET', key)) or now
  if tat < now then tat = now end
  local new_tat = tat + interval
  local allow_at = new_tat - burst * interval
  if now < allow_at then return allow_at - now end
  redis.call('SET', key, string.format('%.0f', new_tat), 'PX',
    math.ceil((new_tat - now) / 1000) + 1)
  return false
end
