-- ARGV: Unix ms. → iso_ms(ms), for a test of the formatter against chrono.
return iso_ms(tonumber(ARGV[1]))
