#!/usr/bin/env bash
# Samples Switchboard with perf's software cpu-clock event (hardware
# counters are not available in this VM) during one harness run.
#   bench/scripts/perf_run.sh NAME DELAY_S SECONDS -- HARNESS_SCENARIO_ARGS...
# e.g. bench/scripts/perf_run.sh s2-10k 20 10 -- s2 --conns 10000
# Output: bench/results/profile/perf_NAME_self.txt (self time only: the release
# build has no frame pointers, so call chains are not reliable). With
# PERF_DWARF=1 call chains are unwound from DWARF instead (larger perf.data)
# and perf_NAME_children.txt gets the inclusive (children) view as well.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT="$PWD"
NAME="$1"; DELAY="$2"; SECS="$3"; shift 3; [ "${1:-}" = "--" ] && shift
OUT="$ROOT/bench/results/profile"; mkdir -p "$OUT"
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
SB="${SWITCHBOARD_BIN:-$ROOT/bench/peers/.run/switchboard}"
export SWITCHBOARD_BIN="$SB"
B="$ROOT/target/release/switchboard-bench"
"$B" --system switchboard --label "switchboard (perf $NAME)" \
  --server "$ROOT/bench/peers/switchboard.sh run {port}" --log-dir "$OUT/logs" \
  --out "$OUT/results.jsonl" --md "$OUT/results.md" "$@" > "$OUT/perf_${NAME}_run.json" &
H=$!
sleep "$DELAY"
PID=$(pgrep -n -f "^$SB serve" || true)
if [ -n "$PID" ]; then
  if [ -n "${PERF_DWARF:-}" ]; then
    perf record -e "${PERF_EVENT:-cpu-clock}" -F 499 --call-graph dwarf,16384 -p "$PID" -o "$OUT/perf.data" -- sleep "$SECS" 2>/dev/null || true
  else
    perf record -e cpu-clock -F 999 -g -p "$PID" -o "$OUT/perf.data" -- sleep "$SECS" 2>/dev/null || true
  fi
fi
wait "$H" || true
if [ -f "$OUT/perf.data" ]; then
  perf report -i "$OUT/perf.data" --no-children --sort dso,symbol --stdio -g none > "$OUT/p.full" 2>/dev/null || true
  grep -v '^#' "$OUT/p.full" | grep -v '^$' | head -60 > "$OUT/perf_${NAME}_self.txt" || true
  if [ -n "${PERF_DWARF:-}" ]; then
    perf report -i "$OUT/perf.data" --children --sort symbol --stdio -g none --percent-limit 1 2>/dev/null \
      | grep -v '^#' | grep -v '^$' | grep -v '(inlined)' | cut -c1-240 | sed 's/ *$//' \
      | head -120 > "$OUT/perf_${NAME}_children.txt" || true
  fi
  rm -f "$OUT/p.full"; [ -n "${PERF_KEEP:-}" ] || rm -f "$OUT/perf.data"
fi
echo "written: $OUT/perf_${NAME}_*.txt"
