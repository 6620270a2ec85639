-- `publish_credentials(credentials, kept, change)`: appends `change` (the
-- JSON of a `CredentialChange`) to the credentials channel, trimmed to
-- about `kept` entries (`MAXLEN ~`). Each entry names the entry before it
-- (`p`, '0-0' for the first): a reader that finds the first entry it gets
-- does not name its position knows that entries in between were trimmed.
local function publish_credentials(credentials, kept, change)
  local newest = redis.call('XREVRANGE', credentials, '+', '-', 'COUNT', 1)
  local prev = '0-0'
  if #newest > 0 then prev = newest[1][1] end
  return redis.call('XADD', credentials, 'MAXLEN', '~', kept, '*', 'c', change, 'p', prev)
end
