#!/usr/bin/env bash
# Churn run (docs/operations.md, "Resource release"): a release gateway on a
# throwaway Redis, actor_idle_timeout shortened to 10 s, then
# `switchboard-bench churn` (5,000 Bays touched once, 20,000 conversations,
# 2,000 WebSockets cut mid-replay, 2,000 aborted /updates; two rounds, each
# followed by 90 s of quiet). Extra arguments go to the churn subcommand.
#
#   bench/scripts/churn.sh [--rounds N] [--bays N] ...
set -euo pipefail
cd "$(dirname "$0")/../.."
ulimit -n "$(ulimit -Hn)"
cargo build --locked --release -p switchboard -p switchboard-bench
export SWITCHBOARD_TIMING__ACTOR_IDLE_TIMEOUT=10s
exec nice target/release/switchboard-bench \
  --server-cpus '' --client-cpus '' --inflight 64 \
  --aux 'bench/peers/redis.sh run {port}' \
  --server 'bench/peers/switchboard.sh run {port} --store redis --redis-url redis://127.0.0.1:{aux_port}' \
  --log-dir bench/results/logs --out bench/results/churn.jsonl \
  churn "$@"
