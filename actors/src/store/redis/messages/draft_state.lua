-- An open draft's text so far and version. KEYS: draft text, versions.
-- ARGV: message id. → {text or false, version or false}
return {redis.call('GET', KEYS[1]), redis.call('HGET', KEYS[2], ARGV[1])}
