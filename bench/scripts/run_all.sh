#!/usr/bin/env bash
# Runs every benchmark scenario against every system and regenerates the
# tables and the S1 plot. Usage (from anywhere):
#
#   bench/scripts/run_all.sh                 # all systems that are installed
#   bench/scripts/run_all.sh switchboard nchan
#
# Scale knobs (environment): S1_AGENTS S1_RATE S1_SECS S2_CONNS S2_SMALL
# S3_CONNS S4_CLIENTS S4_MSGS; ONLY=REGEX repeats just the runs whose
# "LABEL: ARGS" matches (e.g. ONLY='ceiling.*s2'). Results are appended to
# bench/results/results.jsonl (one JSON object per run) and results.md.
#
# The server runs on CPU 0 (`taskset -c 0`, done by the harness), the load
# generator on CPU 1. Before each run the script waits until the machine is
# idle (see wait_idle), so other people's jobs do not pollute the numbers.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT="$PWD"

# Up to the hard limit (20000 here): one fd per connection on each side.
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

S1_AGENTS="${S1_AGENTS:-1000}"
S1_RATE="${S1_RATE:-20}"
S1_SECS="${S1_SECS:-20}"
S2_CONNS="${S2_CONNS:-10000}"
S2_SMALL="${S2_SMALL:-2000}"
S3_CONNS="${S3_CONNS:-15000}"
S4_CLIENTS="${S4_CLIENTS:-2000}"
S4_MSGS="${S4_MSGS:-200}"
IDLE_WAIT_MAX="${IDLE_WAIT_MAX:-2400}" # seconds

# A frozen copy of the server binary: other people rebuild target/ while the
# benchmarks run.
SB_SNAPSHOT="$ROOT/bench/peers/.run/switchboard"
if [ -z "${SWITCHBOARD_BIN:-}" ]; then
  mkdir -p "$(dirname "$SB_SNAPSHOT")"
  [ -x "$SB_SNAPSHOT" ] || cp target/release/switchboard "$SB_SNAPSHOT"
  export SWITCHBOARD_BIN="$SB_SNAPSHOT"
fi
cargo build --release -p switchboard-bench
B="$ROOT/target/release/switchboard-bench"
RES="$ROOT/bench/results"
mkdir -p "$RES"

# Waits (polling every 20 s, at most IDLE_WAIT_MAX) until nobody else is
# using the machine: the CPUs < 10 % busy over 5 s, and the 1-minute load
# average below 1.0 — or below 1.5 right after one of our own runs, whose
# load takes a minute or two to decay from that average.
wait_idle() {
  local waited=0
  while :; do
    local load busy
    load=$(cut -d' ' -f1 /proc/loadavg)
    busy=$(python3 - <<'EOF'
import time
def snap():
    v = list(map(int, open('/proc/stat').readline().split()[1:]))
    return sum(v), v[3] + v[4]
t0, i0 = snap(); time.sleep(5); t1, i1 = snap()
print(round(100 * (1 - (i1 - i0) / max(1, t1 - t0))))
EOF
)
    if awk -v l="$load" -v b="$busy" 'BEGIN{exit !(b < 10 && l < 1.5)}'; then
      echo "[idle] load $load, busy ${busy}% — measuring"
      return 0
    fi
    if [ "$waited" -ge "$IDLE_WAIT_MAX" ]; then
      echo "[idle] still busy after ${waited}s (load $load, ${busy}%) — measuring anyway, noted in the log" >&2
      return 0
    fi
    echo "[idle] load $load, busy ${busy}% — waiting"
    sleep 15; waited=$((waited + 20))
  done
}

server_cmd() {
  case "$1" in
    switchboard) echo "$ROOT/bench/peers/switchboard.sh run {port}" ;;
    nchan) echo "$ROOT/bench/peers/nchan.sh run {port}" ;;
    socketio) echo "$ROOT/bench/peers/socketio.sh run {port}" ;;
    sockudo) echo "$ROOT/bench/peers/sockudo.sh run {port}" ;;
    ceiling) echo "$ROOT/bench/peers/ceiling.sh run {port}" ;;
  esac
}

# Other people's jobs can start in the middle of a run: the harness reports
# the cores other processes used during the measured window
# ("others_cores"); a run above 0.15 is repeated (up to 3 tries) and
# report.py prefers undisturbed runs.
disturbed() {
  python3 -c 'import json,sys; v=json.load(open(sys.argv[1])); sys.exit(0 if (v.get("others_cores") or 0) > 0.15 else 1)' "$RES/last.json" 2>/dev/null
}

measure() { # label args... (the harness command line)
  local label="$1"; shift
  # ONLY=REGEX: run only what matches "LABEL: ARGS" (to repeat single runs).
  if [ -n "${ONLY:-}" ] && ! grep -qE -- "$ONLY" <<<"$label: $*"; then return 0; fi
  for try in 1 2 3; do
    wait_idle
    echo "== $label (try $try): $*"
    if ! "$B" --label "$label" "$@" > "$RES/last.json"; then
      echo "!! $label $* failed" | tee -a "$RES/failures.log"
      return 0
    fi
    disturbed || return 0
    echo "   disturbed by other processes ($(python3 -c 'import json;print(json.load(open("'"$RES"'/last.json"))["others_cores"])') cores): again"
  done
}

run() { # system label args...
  local sys="$1" label="$2"; shift 2
  measure "$label" --system "$sys" --server "$(server_cmd "$sys")" --log-dir "$RES/logs/$sys" "$@"
}

SYSTEMS=("$@")
if [ ${#SYSTEMS[@]} -eq 0 ]; then
  SYSTEMS=(switchboard nchan socketio)
  [ -x bench/peers/.sockudo/bin/sockudo ] && SYSTEMS+=(sockudo)
  SYSTEMS+=(ceiling)
fi

for sys in "${SYSTEMS[@]}"; do
  label="$sys"
  [ "$sys" = switchboard ] && label="switchboard (memory)"
  run "$sys" "$label" --dist "$RES/s1-$sys.dat" s1 --agents "$S1_AGENTS" --rate "$S1_RATE" --duration "$S1_SECS"
  run "$sys" "$label" s1max --agents "$S1_AGENTS"
  run "$sys" "$label" s2 --conns "$S2_SMALL"
  run "$sys" "$label" s2 --conns "$S2_CONNS"
  run "$sys" "$label" s3 --conns "$S3_CONNS" --mode ws
  case "$sys" in switchboard | nchan) run "$sys" "$label" s3 --conns "$S3_CONNS" --mode longpoll ;; esac
  case "$sys" in switchboard | nchan | socketio) run "$sys" "$label" s4 --clients "$S4_CLIENTS" --messages "$S4_MSGS" ;; esac
done

# The redis engine, one node and two nodes sharing one Redis (all server-side
# processes on CPU 0; Redis's CPU and memory count with the server's).
# Subscribers alternate between the nodes; the publisher posts on node 0; in
# S4 every client resumes on the *other* node.
REDIS="${REDIS:-auto}"
if [ "$REDIS" = auto ]; then
  REDIS=0
  if command -v redis-server >/dev/null && "$SWITCHBOARD_BIN" serve --help 2>/dev/null | grep -q redis; then
    REDIS=1
  fi
fi
if [ "$REDIS" = 1 ]; then
  SBR="$ROOT/bench/peers/switchboard.sh run {port} --store redis --redis-url redis://127.0.0.1:{aux_port}"
  AUX="$ROOT/bench/peers/redis.sh run {port}"
  for nodes in 1 2; do
    label="switchboard (redis)"; servers=(--server "$SBR")
    [ "$nodes" = 2 ] && { label="switchboard (redis, 2 nodes)"; servers+=(--server "$SBR"); }
    for args in "s1 --agents $S1_AGENTS --rate $S1_RATE --duration $S1_SECS" "s2 --conns $S2_SMALL" \
                "s4 --clients $S4_CLIENTS --messages $S4_MSGS"; do
      # shellcheck disable=SC2086
      measure "$label" --system switchboard --aux "$AUX" "${servers[@]}" \
        --log-dir "$RES/logs/redis-$nodes" $args
    done
  done
fi

python3 bench/scripts/report.py > "$RES/tables.md"
if command -v gnuplot >/dev/null; then gnuplot bench/scripts/plot_s1.gp; fi
echo "tables: $RES/tables.md; plot: $RES/s1_latency.png"
