-- One step of the round counter (protocol §4; `next_round` in Rust,
-- `store/messages.rs`): a human resets it, an agent adds one and, under a
-- cap (`''` for none), is suppressed once the count reaches it. Returns
-- the count and the flag (`'true'`/`'false'`; `suppressed` when uncapped).
local function round_step(rounds, kind, cap, suppressed)
  if kind ~= 'agent' then return 0, suppressed end
  rounds = rounds + 1
  if cap ~= '' then
    if rounds >= tonumber(cap) then suppressed = 'true' else suppressed = 'false' end
  end
  return rounds, suppressed
end
