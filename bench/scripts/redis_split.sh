#!/usr/bin/env bash
# Gateway CPU per delivery on the Redis engine against the memory engine,
# and two nodes against one, with Redis's own CPU counted apart
# (BENCHMARKS.md, "Redis engine: gateway and Redis apart").
#
#   bench/scripts/redis_split.sh [CONNS] [RUNS]   (default 2000 connections, 2 runs of each)
#
# S2 (CONNS connections in rooms of 4, 1 post/s each): the memory engine,
# one Redis node, and two Redis nodes at CONNS; then, at the same load *per
# node* as each other, one node at CONNS/2 and two nodes at 2×CONNS. A node
# at half the load spends more CPU per delivery (fewer records per read,
# fewer posts per append script, more wake-ups per event), so "two nodes ÷
# one" at the same total load mixes that with the work each node repeats
# (its own tail, decoding every record of the Bay). Redis runs outside
# the harness, pinned to CPU 0 with the gateways, so the harness's "server
# CPU" is the gateways' alone; Redis's CPU comes from `INFO cpu` deltas
# around each run. Appends one JSON line per run to
# bench/results/redis_split.jsonl and prints a table.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT="$PWD"
CONNS="${1:-2000}"
RUNS="${2:-2}"
OUT="$ROOT/bench/results/redis_split.jsonl"
B="$ROOT/target/release/switchboard-bench"
SB="$ROOT/bench/peers/switchboard.sh"
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
DIR=$(mktemp -d)
taskset -c 0 redis-server --port "$PORT" --dir "$DIR" --save '' --appendonly no --daemonize no \
  > "$DIR/redis.log" 2>&1 &
REDIS=$!
trap 'kill $REDIS 2>/dev/null; rm -rf "$DIR"' EXIT
for _ in $(seq 50); do redis-cli -p "$PORT" ping > /dev/null 2>&1 && break; sleep 0.1; done

redis_cpu() { redis-cli -p "$PORT" info cpu | awk -F: '/^used_cpu_(sys|user):/ {s += $2} END {printf "%.3f", s}'; }

run() { # label nodes(0 = memory) connections
  local label="$1" nodes="$2" conns="$3" servers=()
  if [ "$nodes" = 0 ]; then
    servers=(--server "$SB run {port}")
  else
    redis-cli -p "$PORT" flushall > /dev/null
    for _ in $(seq "$nodes"); do
      servers+=(--server "$SB run {port} --store redis --redis-url redis://127.0.0.1:$PORT")
    done
  fi
  local r0 r1 tmp
  tmp=$(mktemp)
  r0=$(redis_cpu)
  "$B" --system switchboard --label "$label" "${servers[@]}" --log-dir "$ROOT/bench/results/logs/redis_split" \
    --out "$tmp" --md /dev/null s2 --conns "$conns" --room-size 4 > /dev/null
  r1=$(redis_cpu)
  python3 - "$tmp" "$r0" "$r1" "$label" "$nodes" >> "$OUT" <<'EOF'
import json, sys
d = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
redis_s = float(sys.argv[3]) - float(sys.argv[2]) if sys.argv[5] != "0" else 0.0
m = d["delivered"] / 1e6
d.update(label=sys.argv[4], nodes=int(sys.argv[5]), redis_cpu_s=round(redis_s, 3),
         redis_cpu_s_per_million=round(redis_s / m, 3) if m else None)
print(json.dumps(d))
EOF
  rm -f "$tmp"
}

HALF=$((CONNS / 2)); DOUBLE=$((CONNS * 2))
for i in $(seq "$RUNS"); do
  run "memory" 0 "$CONNS"
  run "redis, 1 node" 1 "$CONNS"
  run "redis, 2 nodes" 2 "$CONNS"
  run "redis, 1 node, $HALF" 1 "$HALF"
  run "redis, 2 nodes, $DOUBLE" 2 "$DOUBLE"
done
python3 - "$OUT" "$((RUNS * 5))" <<'EOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()][-int(sys.argv[2]):]
print("| run | connections | delivered/s | lost | p50 / p99 ms | gateway CPU-s per M | Redis CPU-s per M | others' cores |")
print("|---|---|---|---|---|---|---|---|")
for r in rows:
    print(f"| {r['label']} | {r['connections']:,} | {r['deliveries_per_s']:,.0f} | {r['lost']} | {r['latency']['p50_ms']} / {r['latency']['p99_ms']} | "
          f"{r['server_cpu_s_per_million']} | {r['redis_cpu_s_per_million'] or '–'} | {r.get('others_cores')} |")
EOF
