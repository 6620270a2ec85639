#!/usr/bin/env bash
# sockudo 5.2.0 peer (crates.io; Pusher protocol).
#   sockudo.sh install         see install_sockudo.sh (cargo install, ~20 min on 2 cores)
#   sockudo.sh run PORT        sockudo in the foreground on 127.0.0.1:PORT (exec)
# App: id "bench", key "bench-key", secret "bench-secret". Rate limiter off (its defaults,
# 100 API calls/min and 20 connects/min per IP, would be what the benchmark measures).
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
case "${1:-}" in
install) exec "$HERE/install_sockudo.sh" ;;
run)
  PORT="${2:?port}"
  BIN="$HERE/.sockudo/bin/sockudo"
  [ -x "$BIN" ] || { echo "sockudo not installed: run $0 install" >&2; exit 1; }
  DIR="$HERE/.run/sockudo-$PORT"; mkdir -p "$DIR"
  cat > "$DIR/config.json" <<CONF
{
  "host": "127.0.0.1",
  "port": $PORT,
  "debug": false,
  "adapter": { "driver": "local" },
  "cache": { "driver": "memory" },
  "queue": { "driver": "memory" },
  "metrics": { "enabled": false },
  "rate_limiter": { "enabled": false, "driver": "memory" },
  "app_manager": {
    "driver": "memory",
    "array": { "apps": [ {
      "id": "bench", "key": "bench-key", "secret": "bench-secret",
      "enabled": true, "enable_client_messages": false,
      "max_connections": 100000,
      "max_client_events_per_second": 1000000,
      "max_backend_events_per_second": 1000000
    } ] }
  }
}
CONF
  cd "$DIR"
  export RUST_LOG="${RUST_LOG:-warn}"
  exec "$BIN" --config="$DIR/config.json"
  ;;
*) echo "usage: $0 install | run PORT" >&2; exit 2 ;;
esac
