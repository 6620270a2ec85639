-- KEYS: the group's hash. → a flat array name1, holder1, name2, holder2,
-- … of the group's leases whose holder's heartbeat lives (Redis's
-- clock), as group_take.lua judges it. Read-only.
local group = KEYS[1]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local fields = redis.call('HGETALL', group)
local beats = {}
for i = 1, #fields, 2 do
  local f = fields[i]
  if string.sub(f, 1, 2) == 'h:' then
    beats[string.sub(f, 3)] = tonumber(fields[i + 1]) or 0
  end
end
local out = {}
for i = 1, #fields, 2 do
  local f = fields[i]
  if string.sub(f, 1, 2) == 'n:' then
    local holder = fields[i + 1]
    if (beats[holder] or 0) > now then
      out[#out + 1] = string.sub(f, 3)
      out[#out + 1] = holder
    end
  end
end
return out
