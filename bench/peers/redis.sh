#!/usr/bin/env bash
# A throwaway Redis for the redis-engine runs (Debian's redis-server, no persistence).
#   redis.sh run PORT          (exec: the pid is redis-server's)
set -euo pipefail
case "${1:-}" in
run) exec redis-server --port "${2:?port}" --bind 127.0.0.1 --save '' --appendonly no --loglevel warning ;;
*) echo "usage: $0 run PORT" >&2; exit 2 ;;
esac
