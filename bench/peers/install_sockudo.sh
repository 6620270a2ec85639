#!/usr/bin/env bash
# Install sockudo 5.2.0 from crates.io into bench/peers/.sockudo (≈20 min on 2 cores).
# Needs protoc and cmake from Debian. Log: bench/peers/.sockudo/build.log
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$HERE/.sockudo"
mkdir -p "$ROOT"
if [ -x "$ROOT/bin/sockudo" ]; then echo "sockudo already installed: $ROOT/bin/sockudo"; exit 0; fi
if ! command -v protoc >/dev/null || ! command -v cmake >/dev/null; then
  apt-get install -y -qq protobuf-compiler cmake
fi
# Separate target dir so it never touches the workspace's target/.
CARGO_TARGET_DIR="$ROOT/target" cargo install sockudo --version 5.2.0 --locked --features redis \
  --root "$ROOT" ${SOCKUDO_JOBS:+-j "$SOCKUDO_JOBS"} 2>&1 | tee "$ROOT/build.log"
rm -rf "$ROOT/target"
echo "installed: $ROOT/bin/sockudo"
