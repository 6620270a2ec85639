#!/usr/bin/env bash
# socket.io 4 peer (npm).
#   socketio.sh install        npm ci in bench/peers/socketio (socket.io 4.8.4, from package-lock.json)
#   socketio.sh run PORT       node server.js PORT (exec: the pid is node's)
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
case "${1:-}" in
install)
  cd "$HERE/socketio" && npm ci --no-audit --no-fund
  ;;
run)
  PORT="${2:?port}"
  exec node "$HERE/socketio/server.js" "$PORT"
  ;;
*) echo "usage: $0 install | run PORT" >&2; exit 2 ;;
esac
