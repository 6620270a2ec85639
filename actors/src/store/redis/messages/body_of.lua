-- The JSON of a history entry's message: its body by id (`i`), or for
-- entries written before bodies were kept apart, the changed body if any,
-- else the JSON in the entry itself (`m`; the id is its first field).
local function body_of(bodies, fields)
  local id, inline
  for j = 1, #fields, 2 do
    if fields[j] == 'i' then id = fields[j + 1] elseif fields[j] == 'm' then inline = fields[j + 1] end
  end
  if not id and inline then id = string.match(inline, '^{"id":"([^"]+)"') end
  if id then
    local body = redis.call('HGET', bodies, id)
    if body then return body end
  end
  return inline
end
