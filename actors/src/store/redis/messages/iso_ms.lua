-- RFC 3339 UTC with milliseconds ("2026-11-30T12:00:00.123Z") of a Unix
-- time in milliseconds: what chrono writes and reads for `createdAt`.
local function iso_ms(ms)
  local secs = math.floor(ms / 1000)
  local milli = ms - secs * 1000
  local days = math.floor(secs / 86400)
  local sod = secs - days * 86400
  -- civil_from_days (H. Hinnant), valid for the proleptic Gregorian calendar
  local z = days + 719468
  local era = math.floor(z / 146097)
  local doe = z - era * 146097
  local yoe = math.floor((doe - math.floor(doe / 1460) + math.floor(doe / 36524)
    - math.floor(doe / 146096)) / 365)
  local y = yoe + era * 400
  local doy = doe - (365 * yoe + math.floor(yoe / 4) - math.floor(yoe / 100))
  local mp = math.floor((5 * doy + 2) / 153)
  local d = doy - math.floor((153 * mp + 2) / 5) + 1
  local m
  if mp < 10 then m = mp + 3 else m = mp - 9 end
  if m <= 2 then y = y + 1 end
  return string.format('%04d-%02d-%02dT%02d:%02d:%02d.%03dZ', y, m, d,
    math.floor(sod / 3600), math.floor((sod % 3600) / 60), sod % 60, milli)
end
