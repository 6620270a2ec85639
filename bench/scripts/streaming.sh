#!/usr/bin/env bash
# Streaming replies under load (BENCHMARKS.md, "Streaming replies"): 100
# drafts at 50 tokens/s, 10 WebSocket subscribers each, then a cancel per
# draft sent through another node than its author's. Three set-ups: one
# node on the memory engine, one node on Redis, two nodes on one Redis.
#
#   bench/scripts/streaming.sh            # all three
#   DRAFTS=20 SECS=5 bench/scripts/streaming.sh
#
# Results are appended to bench/results/streaming.jsonl (one JSON object
# per run, see src/bin/streaming.rs for the fields).
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT="$PWD"
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
DRAFTS="${DRAFTS:-100}" SUBS="${SUBS:-10}" RATE="${RATE:-50}" SECS="${SECS:-10}"
OUT="$ROOT/bench/results/streaming.jsonl"
cargo build --release -p switchboard --bin switchboard -p switchboard-bench --bin switchboard-bench-streaming >/dev/null
BIN="$ROOT/target/release/switchboard"
GEN="$ROOT/target/release/switchboard-bench-streaming"
TMP="$(mktemp -d)"
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$TMP"; }
trap cleanup EXIT

node() { # port [redis-url]
  local args=(serve --bind "127.0.0.1:$1")
  [ -n "${2:-}" ] && args+=(--store redis --redis-url "$2")
  SWITCHBOARD_ADMIN_TOKEN=bench-admin-token SWITCHBOARD_LIMITS__MAX_CONNECTIONS_PER_IP=0 \
    taskset -c 0 "$BIN" "${args[@]}" >"$TMP/node-$1.log" 2>&1 &
  PIDS+=($!)
  for _ in $(seq 150); do curl -sf "http://127.0.0.1:$1/readyz" >/dev/null && return; sleep 0.2; done
  echo "node $1 did not start:" >&2; tail -20 "$TMP/node-$1.log" >&2; exit 1
}

run() { # label nodes
  echo "[$1]"
  taskset -c 1 "$GEN" --nodes "$2" --admin-token bench-admin-token \
    --drafts "$DRAFTS" --subscribers "$SUBS" --rate "$RATE" --secs "$SECS" |
    python3 -c 'import sys,json; r=json.loads(sys.stdin.read()); r["label"]=sys.argv[1]; print(json.dumps(r))' "$1" |
    tee -a "$OUT"
}

stop_all() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; PIDS=(); sleep 1; }

node 18090; run memory-1node 127.0.0.1:18090; stop_all
redis-server --port 18379 --save "" --appendonly no --dir "$TMP" >/dev/null &
PIDS+=($!)
for _ in $(seq 50); do redis-cli -p 18379 ping >/dev/null 2>&1 && break; sleep 0.1; done
node 18091 redis://127.0.0.1:18379; run redis-1node 127.0.0.1:18091
node 18092 redis://127.0.0.1:18379; run redis-2nodes 127.0.0.1:18091,127.0.0.1:18092
