#!/usr/bin/env bash
# redis_call_cost.sh: what one job's lifecycle costs Redis, in instructions.
#
#   bash bench/redis_call_cost.sh [BUILD_DIR]        (default: build)
#
# Runs redis-server under Valgrind's callgrind (instrumentation off while it
# starts), lets build/redis_call_cost warm it up, then counts the
# instructions Redis executes while build/redis_call_cost sends
# BENCH_CALL_COST_ITERATIONS (300) calls as the lifecycle benchmark's
# steady state at 50 connections makes them: each one dq_batch of 6 puts,
# 6 reserves (of jobs put 4 calls before) and 6 deletes (of jobs reserved 4
# calls before), the ready and the reserved set holding 24 to 30 jobs each.
# A job is so put, reserved and deleted in three calls.
# A count, not a time: it does not depend on how busy the machine is, so it
# compares two versions of the backend's functions exactly
# (docs/redis-backend.md, "Cost of a call").
#
# It counts twice: on a Redis without persistence, then on one with an
# append-only file (appendfsync everysec, as bench/redis_bench.sh runs it).
#
# Output: `redis_instructions_per_job: N` and
# `redis_instructions_per_job_aof: N` on stdout; progress on stderr.
set -euo pipefail

BUILD_DIR=${1:-build}
DRIVER=$BUILD_DIR/redis_call_cost
REDIS_SERVER=${REDIS_SERVER:-/usr/bin/redis-server}
ITERATIONS=${BENCH_CALL_COST_ITERATIONS:-300}
PER_BATCH=6

die() { echo "redis_call_cost: $*" >&2; exit 1; }
[[ -x $DRIVER ]] || die "$DRIVER not found (make build)"
SERVER_PID=""
# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# count [REDIS_FLAG...]: instructions per job, on a Redis started with the flags.
count() {
  start_redis_under_callgrind redis_call_cost "$@"
  echo "redis_call_cost: warm-up, then $ITERATIONS calls of $PER_BATCH jobs ${*:-(no persistence)}" >&2
  "$DRIVER" "$PORT" 20 "$PER_BATCH" || die "$DRIVER failed"
  callgrind_control -i on "$SERVER_PID" >/dev/null 2>&1
  "$DRIVER" "$PORT" "$ITERATIONS" "$PER_BATCH" || die "$DRIVER failed"
  callgrind_control -i off "$SERVER_PID" >/dev/null 2>&1
  callgrind_control -d "$SERVER_PID" >/dev/null 2>&1
  redis-cli -p "$PORT" shutdown nosave >/dev/null 2>&1 || true
  wait "$SERVER_PID" 2>/dev/null || true
  SERVER_PID=""
  # Every dump of the run (the explicit one and the one at exit) adds up.
  local total
  total=$(cat "$WORK"/callgrind.* | awk '$1 == "totals:" || $1 == "summary:" { s += $2 } END { print s + 0 }')
  rm -rf "$WORK"
  [[ $total -gt 0 ]] || die "callgrind counted nothing"
  # The driver puts, reserves and deletes (ITERATIONS + 4) * PER_BATCH jobs.
  echo $((total / ((ITERATIONS + 4) * PER_BATCH)))
}

plain=$(count)
# With an append-only file, as redis_bench.sh runs Redis: every write a
# function makes is also appended to it.
aof=$(count --appendonly yes --appendfsync everysec)
echo "redis_instructions_per_job: $plain"
echo "redis_instructions_per_job_aof: $aof"
