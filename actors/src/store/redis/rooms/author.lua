-- KEYS: the room's authors hash. ARGV: the author's participant id, the
-- cap. → {'ok', 'new'|'pending'|'joined'} or {'full'}: an unknown author
-- is counted ('0') only while the room counts fewer than the cap.
local authors = unpack(KEYS)
local author, max = ARGV[1], tonumber(ARGV[2])
local state = redis.call('HGET', authors, author)
if state == '1' then return {'ok', 'joined'} end
if state then return {'ok', 'pending'} end
if redis.call('HLEN', authors) >= max then return {'full'} end
redis.call('HSET', authors, author, '0')
return {'ok', 'new'}
