#!/usr/bin/env bash
# nchan peer (Debian nginx + libnginx-mod-nchan).
#   nchan.sh install           apt-get install nginx libnginx-mod-nchan
#   nchan.sh run PORT          nginx in the foreground on 127.0.0.1:PORT (exec: the pid is nginx's master)
# WS subscriber: GET /sub?id=CH (websocket + longpoll); publisher: POST /pub?id=CH (body = message).
# Messages are kept for replay (buffer 100000 per channel, 15 min), like Switchboard's replay window.
# NCHAN_REDIS_URL=redis://127.0.0.1:P switches channels to Redis (nchan_redis_pass inside each location).
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
case "${1:-}" in
install)
  command -v nginx >/dev/null && [ -f /usr/share/nginx/modules/ngx_nchan_module.so ] && { echo "nchan present"; exit 0; }
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nginx libnginx-mod-nchan
  ;;
run)
  PORT="${2:?port}"
  DIR="$HERE/.run/nchan-$PORT"
  mkdir -p "$DIR"
  REDIS_UP="" ; REDIS_LOC=""
  if [ -n "${NCHAN_REDIS_URL:-}" ]; then
    REDIS_UP="upstream nchan_redis { nchan_redis_server $NCHAN_REDIS_URL; }"
    REDIS_LOC="nchan_redis_pass nchan_redis;"
  fi
  cat > "$DIR/nginx.conf" <<CONF
load_module /usr/share/nginx/modules/ngx_nchan_module.so;
daemon off;
worker_processes 1;
worker_rlimit_nofile 20000;
pid $DIR/nginx.pid;
error_log $DIR/error.log warn;
events { worker_connections 19000; multi_accept on; }
http {
  access_log off;
  client_body_temp_path $DIR/body;
  proxy_temp_path $DIR/proxy;
  fastcgi_temp_path $DIR/fastcgi;
  uwsgi_temp_path $DIR/uwsgi;
  scgi_temp_path $DIR/scgi;
  keepalive_requests 1000000;
  nchan_max_reserved_memory 1024M;
  $REDIS_UP
  server {
    listen 127.0.0.1:$PORT backlog=4096;
    location = /sub {
      nchan_subscriber websocket longpoll;
      nchan_channel_id \$arg_id;
      nchan_message_buffer_length 100000;
      nchan_message_timeout 15m;
      $REDIS_LOC
    }
    location = /pub {
      nchan_publisher http;
      nchan_channel_id \$arg_id;
      nchan_message_buffer_length 100000;
      nchan_message_timeout 15m;
      $REDIS_LOC
    }
    location = /healthz { return 200 "ok"; }
  }
}
CONF
  exec nginx -c "$DIR/nginx.conf" -p "$DIR"
  ;;
*) echo "usage: $0 install | run PORT" >&2; exit 2 ;;
esac
