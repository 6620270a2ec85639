#!/usr/bin/env bash
# Soak run (BENCHMARKS.md, "Soak"): `switchboard-bench soak` starts its own
# Redis (AOF, appendfsync always) and release gateway, holds 10,000
# connections (70 % WebSocket, 30 % /updates) with steady posts for
# --minutes (default 30), restarts the node a third of the way in and
# Redis two thirds in, then reports losses, RSS growth and fds.
#
#   bench/scripts/soak.sh [--minutes 30] [--conns 10000] [--rate 10] ...
#
# Both ends hold ~10,000 sockets: the fd limit is raised as far as allowed
# (20,000 needed with the defaults).
set -euo pipefail
cd "$(dirname "$0")/../.."
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"
if [ "$(ulimit -n)" -lt 20000 ]; then
  echo "warning: fd limit $(ulimit -n) is below the 20,000 the defaults need" >&2
fi
cargo build --locked --release -p switchboard -p switchboard-bench
rm -rf bench/results/soak-run
# Not `nice`d: a starved node and Redis would measure the neighbours.
exec target/release/switchboard-bench \
  --server-cpus '' --client-cpus '' --src-addrs 16 \
  --out bench/results/soak.jsonl \
  soak --bin target/release/switchboard --dir bench/results/soak-run "$@"
