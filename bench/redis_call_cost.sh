#!/usr/bin/env bash
# redis_call_cost.sh: what one job's lifecycle costs Redis, in instructions.
#
#   bash bench/redis_call_cost.sh [BUILD_DIR]        (default: build)
#
# Runs redis-server under Valgrind's callgrind (instrumentation off while it
# starts), lets build/redis_call_cost warm it up, then counts the
# instructions Redis executes while build/redis_call_cost sends
# BENCH_CALL_COST_ITERATIONS (300) iterations of: one dq_batch of 6 puts and
# 6 reserves, then one dq_batch of the 6 deletes. A count, not a time: it
# does not depend on how busy the machine is, so it compares two versions of
# the backend's functions exactly (docs/redis-backend.md, "Cost of a call").
#
# Output: `redis_instructions_per_job: N` on stdout; progress on stderr.
set -euo pipefail

BUILD_DIR=${1:-build}
DRIVER=$BUILD_DIR/redis_call_cost
REDIS_SERVER=${REDIS_SERVER:-/usr/bin/redis-server}
ITERATIONS=${BENCH_CALL_COST_ITERATIONS:-300}
PER_BATCH=6

die() { echo "redis_call_cost: $*" >&2; exit 1; }
[[ -x $DRIVER ]] || die "$DRIVER not found (make build)"
[[ -x $REDIS_SERVER ]] || die "$REDIS_SERVER not found (Debian: apt-get install redis-server)"
for t in valgrind callgrind_control redis-cli; do
  command -v $t >/dev/null || die "$t not found (Debian: apt-get install valgrind redis-tools)"
done

WORK=$(mktemp -d "${TMPDIR:-/tmp}/redis_call_cost.XXXXXX")
SERVER_PID=""
# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
trap 'stop_server 5; rm -rf "$WORK"' EXIT
trap 'exit 130' INT TERM

PORT=$(free_port)
valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$WORK/callgrind.%p" \
  "$REDIS_SERVER" --port "$PORT" --bind 127.0.0.1 --save '' --appendonly no \
  --dir "$WORK" >"$WORK/redis.log" 2>&1 &
SERVER_PID=$!
for _ in $(seq 300); do redis-cli -p "$PORT" ping >/dev/null 2>&1 && break; sleep 0.1; done
redis-cli -p "$PORT" ping >/dev/null 2>&1 || die "redis-server did not start: $(tail -5 "$WORK/redis.log")"

echo "redis_call_cost: warm-up, then $ITERATIONS iterations of $PER_BATCH jobs" >&2
"$DRIVER" "$PORT" 20 "$PER_BATCH"
callgrind_control -i on "$SERVER_PID" >/dev/null 2>&1
"$DRIVER" "$PORT" "$ITERATIONS" "$PER_BATCH"
callgrind_control -i off "$SERVER_PID" >/dev/null 2>&1
callgrind_control -d "$SERVER_PID" >/dev/null 2>&1
redis-cli -p "$PORT" shutdown nosave >/dev/null 2>&1 || true
wait "$SERVER_PID" 2>/dev/null || true
SERVER_PID=""

# Every dump of the run (the explicit one and the one at exit) adds up.
total=$(cat "$WORK"/callgrind.* | awk '$1 == "totals:" || $1 == "summary:" { s += $2 } END { print s + 0 }')
[[ $total -gt 0 ]] || die "callgrind counted nothing"
echo "redis_instructions_per_job: $((total / (ITERATIONS * PER_BATCH)))"
