#!/usr/bin/env bash
# The fan-out targets in one same-run set (BENCHMARKS.md, "Fan-out work"):
# for each system, S1 at 20 and 100 msg/s and its maximum, S2 at 10,000
# connections in 2,500 rooms, S3 idle WebSockets and held long-polls.
#
#   bench/scripts/fanout_targets.sh [SYSTEM...]   (default: switchboard nchan ceiling)
#
# Server on CPU 0, load generator on CPU 1 (the harness pins both). Each run
# waits for an idle machine first (wait_idle in run_all.sh's manner) and
# appends one JSON line to bench/results/targets.jsonl; report_targets.py
# prints the table. SWITCHBOARD_BIN: a frozen copy of the server binary.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT="$PWD"
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
cargo build --release -p switchboard-bench
B="$ROOT/target/release/switchboard-bench"
OUT="${OUT:-$ROOT/bench/results/targets.jsonl}"
S3_CONNS="${S3_CONNS:-15000}"

wait_idle() { # until the CPUs are < 10 % busy over 3 s (at most 5 minutes)
  for _ in $(seq 60); do
    local busy
    busy=$(python3 -c '
import time
def snap():
    v = list(map(int, open("/proc/stat").readline().split()[1:])); return sum(v), v[3] + v[4]
t0, i0 = snap(); time.sleep(3); t1, i1 = snap()
print(round(100 * (1 - (i1 - i0) / max(1, t1 - t0))))')
    [ "$busy" -lt 10 ] && return 0
    echo "[idle] ${busy}% busy, waiting"; sleep 2
  done
}

run() { # system args...
  local sys="$1"; shift
  wait_idle
  echo "== $sys: $*"
  "$B" --system "$sys" --server "$ROOT/bench/peers/$sys.sh run {port}" \
    --log-dir "$ROOT/bench/results/logs/$sys" --out "$OUT" --md /dev/null "$@" > /dev/null \
    || echo "!! $sys $* failed"
}

SYSTEMS=("$@")
[ ${#SYSTEMS[@]} -gt 0 ] || SYSTEMS=(switchboard nchan ceiling)
for sys in "${SYSTEMS[@]}"; do
  run "$sys" s1 --agents 1000 --rate 20 --duration 20
  run "$sys" s1 --agents 1000 --rate 100 --duration 20
  run "$sys" s1max --agents 1000
  run "$sys" s2 --conns 10000 --room-size 4
  run "$sys" s3 --conns "$S3_CONNS" --mode ws
  case "$sys" in switchboard | nchan) run "$sys" s3 --conns "$S3_CONNS" --mode longpoll ;; esac
done
python3 bench/scripts/report_targets.py "$OUT"
