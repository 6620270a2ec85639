#!/usr/bin/env bash
# Attachments at 25 MB: the gateway's peak RSS and throughput for one upload
# and one download, on the local backend and on S3 (s3s-fs), beside curl
# against the object store directly. Usage: bench/scripts/files_25mb.sh [BIN]
# (BIN: the switchboard binary, target/release/switchboard by default).
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=${1:-target/release/switchboard}
S3S=${S3S:-$(command -v s3s-fs || echo "$HOME/.cargo/bin/s3s-fs")}
WORK=$(mktemp -d)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$WORK"; }
trap cleanup EXIT
TOKEN=bay_demo_rex_000000000000000000000000
AUTH="Authorization: Bearer $TOKEN"
printf '\x89PNG\r\n\x1a\n' > "$WORK/big.png"
head -c $((25 * 1024 * 1024 - 8)) /dev/urandom >> "$WORK/big.png"
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
kib() { awk -v k="$1" '/^'"$1"':/ {print $2}' "/proc/$2/status"; }

run() { # $1 label, then env assignments for the gateway
  local label=$1; shift
  local port; port=$(free_port)
  env "$@" SWITCHBOARD_FILES__DIR="$WORK/files-$port" "$BIN" serve --bootstrap config/demo.toml \
    --bind "127.0.0.1:$port" >"$WORK/gw-$port.log" 2>&1 &
  local pid=$!; PIDS+=("$pid")
  until curl -fs "http://127.0.0.1:$port/healthz" >/dev/null; do sleep 0.1; done
  local base; base=$(kib VmRSS "$pid")
  local up; up=$(curl -fsS -H "$AUTH" -F "file=@$WORK/big.png" \
    -w '\n%{speed_upload}' "http://127.0.0.1:$port/api/agent-api/attachments")
  local id; id=$(echo "$up" | head -1 | python3 -c 'import json,sys; print(json.load(sys.stdin)["attachmentId"])')
  local up_speed; up_speed=$(echo "$up" | tail -1)
  local peak_up; peak_up=$(kib VmHWM "$pid")
  local url; url=$(curl -fsS -H "$AUTH" -H 'content-type: application/json' \
    -d "{\"content\":\"big\",\"attachments\":[{\"attachmentId\":\"$id\"}]}" \
    "http://127.0.0.1:$port/api/agent-api/conversations/launch/messages" \
    | python3 -c 'import json,sys; print(json.load(sys.stdin)["metadata"]["attachmentUrl"])')
  local down_speed; down_speed=$(curl -fsS -o "$WORK/out.bin" -w '%{speed_download}' "$url")
  cmp -s "$WORK/big.png" "$WORK/out.bin" || { echo "$label: the bytes came back changed"; exit 1; }
  local peak; peak=$(kib VmHWM "$pid")
  printf '%-8s base RSS %6d KiB  peak after upload %6d KiB  peak after download %6d KiB  upload %6.1f MB/s  download %6.1f MB/s\n' \
    "$label" "$base" "$peak_up" "$peak" "$(echo "$up_speed / 1000000" | bc -l)" "$(echo "$down_speed / 1000000" | bc -l)"
}

run local

S3PORT=$(free_port)
mkdir -p "$WORK/s3/bench"
"$S3S" --host 127.0.0.1 --port "$S3PORT" --access-key AK --secret-key SKSKSKSK "$WORK/s3" >/dev/null 2>&1 &
PIDS+=("$!")
until (echo >"/dev/tcp/127.0.0.1/$S3PORT") 2>/dev/null; do sleep 0.1; done
run s3 SWITCHBOARD_FILES__BACKEND=s3 SWITCHBOARD_FILES__S3__ENDPOINT="http://127.0.0.1:$S3PORT" \
  SWITCHBOARD_FILES__S3__BUCKET=bench SWITCHBOARD_FILES__S3__ACCESS_KEY_ID=AK \
  SWITCHBOARD_FILES__S3__SECRET_ACCESS_KEY=SKSKSKSK

# The object store on its own, through curl's SigV4 signing.
SIG=(--aws-sigv4 "aws:amz:us-east-1:s3" --user "AK:SKSKSKSK" -H "x-amz-content-sha256: UNSIGNED-PAYLOAD")
put=$(curl -fsS "${SIG[@]}" -T "$WORK/big.png" -w '%{speed_upload}' "http://127.0.0.1:$S3PORT/bench/direct.png")
get=$(curl -fsS "${SIG[@]}" -o "$WORK/direct.bin" -w '%{speed_download}' "http://127.0.0.1:$S3PORT/bench/direct.png")
printf '%-8s upload %6.1f MB/s  download %6.1f MB/s\n' "curl→s3" \
  "$(echo "$put / 1000000" | bc -l)" "$(echo "$get / 1000000" | bc -l)"
