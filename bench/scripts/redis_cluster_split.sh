#!/usr/bin/env bash
# The capacity plan checked in small (docs/capacity.md): a 3-master Redis
# Cluster with two gateway nodes against one standalone Redis with one
# node, at the same load per Redis master.
#
#   bench/scripts/redis_cluster_split.sh [CONNS] [BAYS] [RUNS]
#     (default 1000 connections and 4 Bays per master, 2 runs of each)
#
# S2 (rooms of 4, 1 post/s per connection), its rooms spread over Bays
# (`--bays`: room r in Bay r % bays). A Bay's keys share one hash slot, so
# Bays are what spread over a cluster's masters.
#   * "standalone": one Redis, one node, CONNS connections in BAYS Bays;
#   * "cluster": three masters, two nodes, 3 × CONNS connections in
#     3 × BAYS Bays: the same posts per master if the Bays hash evenly
#     (each master's share of the keys is printed; it is never exact);
#   * the same on one node, to tell the cluster's cost from the second
#     node's (every node tails every Bay it has members of).
# Redis's CPU is `INFO cpu` deltas summed over the masters, per post and
# per master; the gateways' CPU is the harness's server CPU. Every Redis
# and gateway runs on CPU 0, the load generator on CPU 1. Appends one JSON
# line per run to bench/results/redis_cluster_split.jsonl and prints a table.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT="$PWD"
CONNS="${1:-1000}"
BAYS="${2:-4}"
RUNS="${3:-2}"
OUT="$ROOT/bench/results/redis_cluster_split.jsonl"
B="$ROOT/target/release/switchboard-bench"
SB="$ROOT/bench/peers/switchboard.sh"
# A free port below 55536: a cluster node also listens on its port + 10000.
free_port() {
  python3 -c '
import random, socket
while True:
    p = random.randrange(20000, 45000)
    try:
        for q in (p, p + 10000):
            s = socket.socket(); s.bind(("127.0.0.1", q)); s.close()
        print(p); break
    except OSError:
        pass'
}
DIR=$(mktemp -d)
PIDS=()
trap 'kill "${PIDS[@]}" 2>/dev/null; rm -rf "$DIR"' EXIT

start_redis() { # port [cluster]
  local port="$1" extra=()
  mkdir -p "$DIR/$port"
  [ "${2:-}" = cluster ] && extra=(--cluster-enabled yes --cluster-config-file "$DIR/$port/nodes.conf")
  taskset -c 0 redis-server --port "$port" --dir "$DIR/$port" --save '' --appendonly no \
    --daemonize no "${extra[@]}" > "$DIR/$port/redis.log" 2>&1 &
  PIDS+=($!)
  for _ in $(seq 50); do redis-cli -p "$port" ping > /dev/null 2>&1 && return; sleep 0.1; done
  echo "redis on $port did not start" >&2; exit 1
}

SOLO=$(free_port); start_redis "$SOLO"
MASTERS=("$(free_port)" "$(free_port)" "$(free_port)")
for p in "${MASTERS[@]}"; do start_redis "$p" cluster; done
redis-cli --cluster create "${MASTERS[@]/#/127.0.0.1:}" --cluster-replicas 0 --cluster-yes > "$DIR/create.log"
for _ in $(seq 100); do
  redis-cli -p "${MASTERS[0]}" cluster info | grep -q 'cluster_state:ok' && break; sleep 0.1
done
CLUSTER_URL=$(printf 'redis://127.0.0.1:%s,' "${MASTERS[@]}"); CLUSTER_URL="${CLUSTER_URL%,}"

cpu_of() { redis-cli -p "$1" info cpu | awk -F: '/^used_cpu_(sys|user):/ {s += $2} END {printf "%.3f", s}'; }
cpus() { local out=(); for p in "$@"; do out+=("$(cpu_of "$p")"); done; echo "${out[*]}"; }
keys() { local out=(); for p in "$@"; do out+=("$(redis-cli -p "$p" dbsize)"); done; echo "${out[*]}"; }

run() { # label mode(standalone|cluster) [gateway nodes on the cluster]
  local label="$1" mode="$2" servers=() ports conns bays
  if [ "$mode" = standalone ]; then
    ports=("$SOLO"); conns=$CONNS; bays=$BAYS
    redis-cli -p "$SOLO" flushall > /dev/null
    servers=(--server "$SB run {port} --store redis --redis-url redis://127.0.0.1:$SOLO")
  else
    ports=("${MASTERS[@]}"); conns=$((CONNS * 3)); bays=$((BAYS * 3))
    for p in "${MASTERS[@]}"; do redis-cli -p "$p" flushall > /dev/null; done
    for _ in $(seq "${3:-2}"); do
      servers+=(--server "$SB run {port} --store redis --redis-cluster --redis-url $CLUSTER_URL")
    done
  fi
  local r0 r1 k tmp
  tmp=$(mktemp)
  r0=$(cpus "${ports[@]}")
  "$B" --system switchboard --label "$label" --bays "$bays" "${servers[@]}" \
    --log-dir "$ROOT/bench/results/logs/redis_cluster_split" --out "$tmp" --md /dev/null \
    s2 --conns "$conns" --room-size 4 > /dev/null
  r1=$(cpus "${ports[@]}")
  k=$(keys "${ports[@]}")
  python3 - "$tmp" "$r0" "$r1" "$k" "$label" "$bays" "${#ports[@]}" >> "$OUT" <<'EOF'
import json, sys
d = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
r0 = [float(x) for x in sys.argv[2].split()]
r1 = [float(x) for x in sys.argv[3].split()]
per_master = [round(b - a, 3) for a, b in zip(r0, r1)]
keys = [int(x) for x in sys.argv[4].split()]
posts = d["delivered"] / d["room_size"]
d.update(label=sys.argv[5], bays=int(sys.argv[6]), masters=int(sys.argv[7]),
         redis_cpu_s=per_master, redis_keys=keys,
         redis_us_per_post=round(sum(per_master) / posts * 1e6, 1) if posts else None)
print(json.dumps(d))
EOF
  rm -f "$tmp"
}

for _ in $(seq "$RUNS"); do
  run "standalone, 1 node" standalone
  run "3-master cluster, 2 nodes" cluster 2
  run "3-master cluster, 1 node" cluster 1
done
python3 - "$OUT" "$((RUNS * 3))" <<'EOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()][-int(sys.argv[2]):]
print("| run | connections | Bays | delivered/s | lost | p50 / p99 ms | gateway CPU-s per M | Redis µs per post | Redis CPU-s per master | keys per master |")
print("|---|---|---|---|---|---|---|---|---|---|")
for r in rows:
    print(f"| {r['label']} | {r['connections']:,} | {r['bays']} | {r['deliveries_per_s']:,.0f} | {r['lost']} | "
          f"{r['latency']['p50_ms']} / {r['latency']['p99_ms']} | {r['server_cpu_s_per_million']} | "
          f"{r['redis_us_per_post']} | {' / '.join(map(str, r['redis_cpu_s']))} | {' / '.join(map(str, r['redis_keys']))} |")
EOF
