-- The revision of conversation `cid` (`revisions` hash; '0' for one
-- created before revisions existed), or false when `conversations` has no
-- such conversation. A write routed with another revision answers
-- 'stale' and stores nothing (`Revisioned` in Rust, `store/mod.rs`).
local function revision_of(conversations, revisions, cid)
  local rev = redis.call('HGET', revisions, cid)
  if rev then return rev end
  if redis.call('HEXISTS', conversations, cid) == 0 then return false end
  return '0'
end
