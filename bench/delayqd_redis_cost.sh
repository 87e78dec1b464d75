#!/usr/bin/env bash
# delayqd_redis_cost.sh: what one job's lifecycle costs a delayqd instance
# on the Redis backend, in user-space instructions (its own code, Asio,
# hiredis and libc; not the kernel).
#
#   bash bench/delayqd_redis_cost.sh [BUILD_DIR]        (default: build)
#
# Starts a plain redis-server and build/delayqd on it under Valgrind's
# callgrind (instrumentation off while it starts), warms it up with 2,000
# lifecycles of build/loadgen (25 connections: put, reserve, delete), then
# counts the instructions delayqd executes during BENCH_DQ_COST_JOBS
# (20,000) more. A count, not a time: it compares two versions of the
# instance's Redis path (RESP, replies, batching) whatever the machine's
# load. Under Valgrind the instance runs slower, so its batches are larger
# than at full speed (the calls per job are printed too).
#
# Output: `delayqd_redis_instructions_per_job: N` and
# `delayqd_redis_jobs_per_call: N` on stdout; progress on stderr.
set -euo pipefail

BUILD_DIR=${1:-build}
DELAYQD=$BUILD_DIR/delayqd
LOADGEN=$BUILD_DIR/loadgen
REDIS_SERVER=${REDIS_SERVER:-/usr/bin/redis-server}
JOBS=${BENCH_DQ_COST_JOBS:-20000}

die() { echo "delayqd_redis_cost: $*" >&2; exit 1; }
[[ -x $DELAYQD && -x $LOADGEN ]] || die "$DELAYQD or $LOADGEN not found (make build)"
[[ -x $REDIS_SERVER ]] || die "$REDIS_SERVER not found (Debian: apt-get install redis-server)"
for t in valgrind callgrind_control redis-cli; do
  command -v $t >/dev/null || die "$t not found (Debian: apt-get install valgrind redis-tools)"
done
SERVER_PID=""
REDIS_PID=""
# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/delayqd_redis_cost.XXXXXX")
cleanup() {
  stop_server 5
  if [[ -n $REDIS_PID ]]; then kill "$REDIS_PID" 2>/dev/null || true; wait "$REDIS_PID" 2>/dev/null || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

REDIS_PORT=$(free_port)
"$REDIS_SERVER" --port "$REDIS_PORT" --bind 127.0.0.1 --save '' --appendonly no \
  --dir "$WORK" >"$WORK/redis.log" 2>&1 &
REDIS_PID=$!
for _ in $(seq 100); do redis-cli -p "$REDIS_PORT" ping >/dev/null 2>&1 && break; sleep 0.1; done
redis-cli -p "$REDIS_PORT" ping >/dev/null 2>&1 || die "redis-server did not start"

PORT=$(free_port)
valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$WORK/callgrind.%p" \
  "$DELAYQD" -l 127.0.0.1 -p "$PORT" --no-http --log-level warn \
  --backend "redis://127.0.0.1:$REDIS_PORT" >"$WORK/delayqd.log" 2>&1 &
SERVER_PID=$!
for _ in $(seq 300); do
  kill -0 "$SERVER_PID" 2>/dev/null || die "delayqd exited: $(tail -3 "$WORK/delayqd.log")"
  (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null && break
  sleep 0.1
done
LIFE=(--port "$PORT" --connections 25 --mode lifecycle --tube bench)
echo "delayqd_redis_cost: warm-up, then $JOBS lifecycles under callgrind" >&2
"$LOADGEN" "${LIFE[@]}" --jobs 2000 >/dev/null 2>&1 || die "loadgen failed (warm-up)"
redis-cli -p "$REDIS_PORT" config resetstat >/dev/null
callgrind_control -i on "$SERVER_PID" >/dev/null 2>&1
"$LOADGEN" "${LIFE[@]}" --jobs "$JOBS" >/dev/null 2>&1 || die "loadgen failed"
callgrind_control -i off "$SERVER_PID" >/dev/null 2>&1
calls=$(redis-cli -p "$REDIS_PORT" info commandstats | awk -F'[=,]' '/^cmdstat_fcall:/ { print $2 }')
callgrind_control -d "$SERVER_PID" >/dev/null 2>&1
stop_server 5
total=$(cat "$WORK"/callgrind.* | awk '$1 == "totals:" || $1 == "summary:" { s += $2 } END { printf "%.0f", s }')
[[ ${total:-0} -gt 0 ]] || die "callgrind counted nothing"
echo "delayqd_redis_instructions_per_job: $((total / JOBS))"
awk -v j="$JOBS" -v c="${calls:-0}" 'BEGIN { if (c > 0) printf "delayqd_redis_jobs_per_call: %.1f\n", j / c }'
