-- The newer of two read markers ("<seq> <message id>", or false/nil for
-- none): the explicit one (`reads` hash) and the one a post set
-- (`r:<participant>` in the state hash).
local function newer_marker(a, b)
  if not a then return b end
  if not b then return a end
  if tonumber(string.match(b, '^(%d+)')) > tonumber(string.match(a, '^(%d+)')) then return b end
  return a
end
