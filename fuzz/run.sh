#!/usr/bin/env bash
# Runs each fuzz target for N minutes in random mode (docs/fuzzing.md).
#
#   fuzz/run.sh [minutes] [target...]     minutes: default 1, decimals allowed
#
# Builds switchboard-fuzz in release, then runs one target at a time:
# its corpus (fuzz/corpus/<target>/) first, then random inputs until the
# time is up. Prints the executions per target (and how many got past the
# target's first gate: valid JSON, an accepted cursor…). A failing input is printed
# and saved as fuzz/corpus/<target>/crash-<hash>, where a plain
# `cargo test -p switchboard-fuzz <target>` replays it. Exits 1 if any
# target found something, 2 if the build failed.
set -uo pipefail

ALL_TARGETS=(cursor ws_frame frame_guard card poll webhook_url mentions names route)

cd "$(dirname "$0")/.."
minutes="${1:-1}"
[ $# -gt 0 ] && shift
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=("${ALL_TARGETS[@]}")

if ! [[ "$minutes" =~ ^[0-9]+([.][0-9]+)?$ ]]; then
    echo "usage: fuzz/run.sh [minutes] [target...]   (targets: ${ALL_TARGETS[*]})" >&2
    exit 2
fi
for t in "${targets[@]}"; do
    if [[ " ${ALL_TARGETS[*]} " != *" $t "* ]]; then
        echo "unknown target '$t' (targets: ${ALL_TARGETS[*]})" >&2
        exit 2
    fi
done
ms=$(awk -v m="$minutes" 'BEGIN { printf "%d", m * 60000 }')

logs="target/fuzz-logs"
mkdir -p "$logs"

echo "building switchboard-fuzz (release)…"
# Build once through cargo, then run the test binary directly: cargo would
# hold the target directory's lock for the whole run otherwise.
if ! cargo test -p switchboard-fuzz --release --lib --no-run --message-format=json \
    >"$logs/build.json" 2>"$logs/build.log"; then
    cat "$logs/build.log" >&2
    echo "build failed" >&2
    exit 2
fi
bin=$(grep -o '"executable":"[^"]*switchboard_fuzz[^"]*"' "$logs/build.json" | tail -1 | cut -d'"' -f4)
if [ -z "$bin" ] || [ ! -x "$bin" ]; then
    echo "no switchboard-fuzz test binary in $logs/build.json" >&2
    exit 2
fi

failed=()
summary=()
for t in "${targets[@]}"; do
    echo "== $t: ${minutes} min"
    log="$logs/$t.log"
    BOLERO_RANDOM_TEST_TIME_MS="$ms" SWITCHBOARD_FUZZ_SAVE=1 RUST_BACKTRACE=0 \
        "$bin" --exact "targets::$t::$t" --nocapture >"$log" 2>&1
    rc=$?
    stats=$(grep -m1 "^fuzz-stats target=$t " "$log" || true)
    if [ $rc -eq 0 ] && [ -n "$stats" ]; then
        execs=$(sed -E 's/.* execs=([0-9]+).*/\1/' <<<"$stats")
        rate=$(sed -E 's/.* execs_per_sec=([0-9]+).*/\1/' <<<"$stats")
        deep=$(sed -E 's/.* deep=([0-9]+).*/\1/' <<<"$stats")
        echo "   ok: $execs executions ($rate/s), $deep past the first gate"
        summary+=("$(printf '%-12s %12s execs  %8s/s  %12s deep  ok' "$t" "$execs" "$rate" "$deep")")
    else
        failed+=("$t")
        echo "   FINDING (or error), exit $rc; log: $log"
        # The harness's report: cause (panic message and location) and input.
        grep -A40 -m1 -E "found a failing input|corpus file .* fails" "$log" | head -60
        summary+=("$(printf '%-12s %12s execs  %8s    %12s       FAILED (see %s)' "$t" "?" "" "" "$log")")
    fi
done

echo
echo "== summary (${minutes} min per target)"
printf '%s\n' "${summary[@]}"
saved=$(find fuzz/corpus -name 'crash-*' -newer "$logs/build.log" 2>/dev/null)
if [ -n "$saved" ]; then
    echo "saved failing inputs:"
    echo "$saved"
fi
if [ ${#failed[@]} -gt 0 ]; then
    echo "targets with findings: ${failed[*]}"
    exit 1
fi
