-- KEYS: the lease. ARGV: holder. Deletes the lease if the holder has it.
local lease, holder = KEYS[1], ARGV[1]
if redis.call('GET', lease) == holder then redis.call('DEL', lease) end
return 1
