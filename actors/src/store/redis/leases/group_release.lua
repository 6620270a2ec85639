-- KEYS: the group's hash. ARGV: lease name, holder. Lets the lease go if
-- the holder has it.
local group = KEYS[1]
local name, holder = ARGV[1], ARGV[2]
if redis.call('HGET', group, 'n:' .. name) == holder then
  redis.call('HDEL', group, 'n:' .. name)
end
return 1
