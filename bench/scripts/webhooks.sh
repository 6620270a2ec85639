#!/usr/bin/env bash
# Webhook fan-out (BENCHMARKS.md, "Webhook fan-out"): every configuration
# REPEAT times, memory and redis engines, 100 and 1,000 agents, a fixed rate
# and a max-rate run. Usage (from anywhere):
#
#   bench/scripts/webhooks.sh                    # the whole matrix
#   ONLY='redis.*1000' bench/scripts/webhooks.sh # runs whose "LABEL: ARGS" match
#
# Knobs (environment): REPEAT (3), SWITCHBOARD_BIN (the frozen server binary,
# default bench/peers/.run/switchboard), OUT (results file), TAG (appended to
# each run's label, e.g. the binary's commit), IDLE_WAIT_MAX (s, 90): before each
# run the script waits until the CPUs are < 25 % busy over 5 s, at most that
# long (the machine is shared; others_cores in each result says how busy it
# was during the measured window). Results: bench/results/webhooks.jsonl.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT="$PWD"
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
REPEAT="${REPEAT:-3}"
IDLE_WAIT_MAX="${IDLE_WAIT_MAX:-90}"
export SWITCHBOARD_BIN="${SWITCHBOARD_BIN:-$ROOT/bench/peers/.run/switchboard}"
[ -x "$SWITCHBOARD_BIN" ] || { echo "no server binary at $SWITCHBOARD_BIN" >&2; exit 1; }
B="$ROOT/target/release/switchboard-bench"
OUT="${OUT:-$ROOT/bench/results/webhooks.jsonl}"
TAG="${TAG:+ $TAG}"

wait_idle() {
  local waited=0 busy
  while :; do
    busy=$(python3 - <<'EOF'
import time
def snap():
    v = list(map(int, open('/proc/stat').readline().split()[1:]))
    return sum(v), v[3] + v[4]
t0, i0 = snap(); time.sleep(5); t1, i1 = snap()
print(round(100 * (1 - (i1 - i0) / max(1, t1 - t0))))
EOF
)
    if [ "$busy" -lt 25 ] || [ "$waited" -ge "$IDLE_WAIT_MAX" ]; then
      echo "[idle] busy ${busy}%, load $(cut -d' ' -f1 /proc/loadavg), waited ${waited}s"
      return 0
    fi
    sleep 10; waited=$((waited + 15))
  done
}

SB="$ROOT/bench/peers/switchboard.sh run {port}"
REDIS_ARGS=(--aux "$ROOT/bench/peers/redis.sh run {port}"
  --server "$SB --store redis --redis-url redis://127.0.0.1:{aux_port}")

run() { # LABEL ENGINE ARGS...
  local label="$1" engine="$2"; shift 2
  if [ -n "${ONLY:-}" ] && ! [[ "$label: $*" =~ $ONLY ]]; then return 0; fi
  local server=(--server "$SB")
  [ "$engine" = redis ] && server=("${REDIS_ARGS[@]}")
  for i in $(seq 1 "$REPEAT"); do
    wait_idle
    echo "== $label: $* (run $i)"
    local logs="$ROOT/bench/results/logs/webhooks-$engine-$(date -u +%H%M%S)"
    echo "   server logs: $logs"
    "$B" --system switchboard --label "$label$TAG" "${server[@]}" --out "$OUT" --log-dir "$logs" \
      --md "$ROOT/bench/results/webhooks.md" webhooks "$@" \
      | python3 -c 'import json,sys; v=json.load(sys.stdin); print({k: v[k] for k in ("deliveries_per_s","deliveries_per_s_steady","lost","undelivered_at_cutoff","delivered_after_cutoff","duplicates_by_webhook_id","out_of_order_vs_seq","agents_order_differs","gateway_cpu_s_per_1000","aux_cpu_s_per_1000","others_cores","end")}, "created p50/p99", v["latency_created"]["p50_ms"], v["latency_created"]["p99_ms"])' \
      || echo "   run failed"
  done
}

for engine in memory redis; do
  run "switchboard ($engine)" "$engine" --agents 100 --rate 10 --messages 200
  run "switchboard ($engine)" "$engine" --agents 100 --rate 0 --messages 300
  run "switchboard ($engine)" "$engine" --agents 1000 --rate 0.2 --messages 8
  run "switchboard ($engine)" "$engine" --agents 1000 --rate 0 --messages 8
done
