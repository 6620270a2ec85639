#!/usr/bin/env bash
# The ceiling: the smallest fan-out server (bench/src/bin/ceiling.rs): tokio-tungstenite,
# one broadcast channel per room, no auth, no JSON. WS /ws/ROOM, POST /pub/ROOM.
#   ceiling.sh run PORT        (build first: cargo build --release -p switchboard-bench)
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
BIN="${CEILING_BIN:-$HERE/../../target/release/switchboard-bench-ceiling}"
case "${1:-}" in
run) exec "$BIN" "127.0.0.1:${2:?port}" ;;
*) echo "usage: $0 run PORT" >&2; exit 2 ;;
esac
