-- Publishes one change on the credentials channel, apart from the write
-- it announces (on a Redis Cluster, where the channel lives in another
-- slot than the Bay). KEYS and ARGV: `PublishCredentialsKeys` and
-- `PublishCredentialsArgs` (directory.rs). → the entry's id
local credentials = unpack(KEYS)
local kept, change = unpack(ARGV)

return publish_credentials(credentials, kept, change)
