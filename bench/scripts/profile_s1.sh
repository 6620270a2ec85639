#!/usr/bin/env bash
# "Where the time goes": profiles Switchboard on a short S1 run.
#
# `perf stat -e instructions` is not supported on this machine (no hardware
# counters in the VM), so the primary profile is callgrind (instruction
# counts, deterministic): 100 subscribers, 20 msg/s for 11 s. A second,
# sampled profile uses perf's software `cpu-clock` event at full speed
# (1,000 subscribers, 50 msg/s), which includes kernel time.
# Output: bench/results/profile/{callgrind_*.txt,perf_*.txt}
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT="$PWD"
OUT="$ROOT/bench/results/profile"
mkdir -p "$OUT"
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
SB="${SWITCHBOARD_BIN:-$ROOT/bench/peers/.run/switchboard}"
[ -x "$SB" ] || { mkdir -p "$(dirname "$SB")"; cp target/release/switchboard "$SB"; }
export SWITCHBOARD_BIN="$SB"
cargo build --release -p switchboard-bench
B="$ROOT/target/release/switchboard-bench"

# 1. callgrind
rm -f "$OUT"/callgrind.out*
SWITCHBOARD_WRAP="valgrind --tool=callgrind --callgrind-out-file=$OUT/callgrind.out" \
BENCH_STOP_GRACE_SECS=180 \
"$B" --system switchboard --label "switchboard (callgrind)" \
  --server "$ROOT/bench/peers/switchboard.sh run {port}" --log-dir "$OUT/logs" \
  --out "$OUT/results.jsonl" --md "$OUT/results.md" \
  s1 --agents 100 --rate 20 --warmup 1 --duration 10 > "$OUT/callgrind_run.json"
callgrind_annotate --inclusive=no "$OUT/callgrind.out" > "$OUT/callgrind_self.full" 2>/dev/null || true
callgrind_annotate --inclusive=yes "$OUT/callgrind.out" > "$OUT/callgrind_inclusive.full" 2>/dev/null || true
head -80 "$OUT/callgrind_self.full" > "$OUT/callgrind_self.txt"
head -150 "$OUT/callgrind_inclusive.full" > "$OUT/callgrind_inclusive.txt"
rm -f "$OUT"/*.full

# 2. perf, sampled (software clock), full speed; and S2 at 10,000
#    connections, where the per-post cost grows with the Bay's sessions.
if perf record -e cpu-clock -o /dev/null -- true >/dev/null 2>&1; then
  bench/scripts/perf_run.sh s1 12 8 -- s1 --agents 1000 --rate 50 --warmup 5 --duration 15
  bench/scripts/perf_run.sh s2-10k 25 10 -- s2 --conns 10000 --warmup 5 --duration 20
fi
echo "profile written to $OUT"
