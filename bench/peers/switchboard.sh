#!/usr/bin/env bash
# Switchboard under benchmark settings.
#   switchboard.sh run PORT [extra serve flags]   exec the release binary (SWITCHBOARD_BIN overrides)
# Rate limits are raised (the protocol's 20/min /updates and 60/min agent budgets would be what
# the benchmark measures) and the per-IP caps on connections and held polls are off. Admin token: bench-admin-token.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
BIN="${SWITCHBOARD_BIN:-$HERE/../../target/release/switchboard}"
case "${1:-}" in
run)
  PORT="${2:?port}"; shift 2
  export SWITCHBOARD_ADMIN_TOKEN=bench-admin-token
  export SWITCHBOARD_LIMITS__UPDATES_PER_MINUTE=1000000000
  export SWITCHBOARD_LIMITS__AGENT_REQUESTS_PER_MINUTE=1000000000
  export SWITCHBOARD_LIMITS__MAX_CONNECTIONS_PER_IP=0
  export SWITCHBOARD_LIMITS__MAX_HELD_POLLS_PER_IP=0
  export RUST_LOG="${RUST_LOG:-warn}"
  # SWITCHBOARD_WRAP: a profiler to run the server under (e.g. "valgrind --tool=callgrind").
  exec ${SWITCHBOARD_WRAP:-} "$BIN" serve --bind "127.0.0.1:$PORT" "$@"
  ;;
*) echo "usage: $0 run PORT [serve flags]" >&2; exit 2 ;;
esac
