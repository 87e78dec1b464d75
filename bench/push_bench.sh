#!/usr/bin/env bash
# push_bench.sh: push topics (docs/push.md) on this machine: a fresh
# delayqd (--in-memory --push-allow-private) and build/push_bench, whose
# receiver (one thread, keep-alive) shares the cores with it.
#
#   bash bench/push_bench.sh [BUILD_DIR]        (default: build)
#
# Output: push_bench's `name: value` lines (lateness at BENCH_PUSH_RATE a
# second, retries' lateness, pushes per second), the headline `push_per_s`
# last. Knobs: BENCH_PUSH_JOBS (100000), BENCH_PUSH_RATE (1000),
# BENCH_PUSH_SECONDS (5).
set -euo pipefail

BUILD_DIR=${1:-build}
DELAYQD=$BUILD_DIR/delayqd
die() {
  echo "push_bench.sh: $*" >&2
  exit 1
}
# shellcheck source=bench/lib.sh
source "$(dirname "$0")/lib.sh"
[[ -x $DELAYQD && -x $BUILD_DIR/push_bench ]] || die "build delayqd and push_bench first"
WORK=$(mktemp -d)
trap 'stop_server; rm -rf "$WORK"' EXIT
# Each failed try of the retry phase is a warning in $WORK/delayqd.log.
start_delayqd_two_ports --push-allow-private
"$BUILD_DIR/push_bench" --port "$HTTP_PORT" --jobs "${BENCH_PUSH_JOBS:-100000}" \
  --rate "${BENCH_PUSH_RATE:-1000}" --seconds "${BENCH_PUSH_SECONDS:-5}"
