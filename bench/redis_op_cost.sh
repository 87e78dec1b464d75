#!/usr/bin/env bash
# redis_op_cost.sh: what single calls cost Redis, in instructions, to see
# where the Redis backend's time goes (docs/redis-backend.md, "Cost of a
# call"). bench/redis_call_cost.sh measures a whole lifecycle; this one
# measures its parts.
#
#   bash bench/redis_op_cost.sh [BUILD_DIR]        (default: build)
#
# Runs redis-server under Valgrind's callgrind, loads the backend's function
# library (through build/redis_call_cost) and a small library of probes,
# then sends each command below BENCH_OP_COST_CALLS (2000) times with
# redis-benchmark (one connection) and prints the instructions Redis
# executed per call, `redis_op_instructions_<name>: N`:
#   ping          PING: a command's round trip, for reference
#   fcall_empty   FCALL of a function that returns at once
#   call_hget     + one redis.call('HGET') (each probe does its work 10
#                 times per call; the figure is per time, the empty FCALL
#                 and the probe's loop taken off)
#   call_hmget5   + one HMGET of 5 fields (3 present)
#   call_hset6    + one HSET of 6 field-value pairs
#   lua_table6    + one table constructor with 6 fields
#   lua_concat    + one concatenation of a string and a number
#   lua_format    + one string.format('%013d', n)
#   dq_tick       the backend's dq_tick on an empty topic: the fixed cost
#                 of every call (its time, due jobs, next wake-up)
#   dq_put        the backend's dq_put of a ready job with a 64-byte body
set -euo pipefail

BUILD_DIR=${1:-build}
DRIVER=$BUILD_DIR/redis_call_cost
REDIS_SERVER=${REDIS_SERVER:-/usr/bin/redis-server}
CALLS=${BENCH_OP_COST_CALLS:-2000}

die() { echo "redis_op_cost: $*" >&2; exit 1; }
[[ -x $DRIVER ]] || die "$DRIVER not found (make build)"
command -v redis-benchmark >/dev/null || die "redis-benchmark not found (Debian: apt-get install redis-tools)"
SERVER_PID=""
# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
start_redis_under_callgrind redis_op_cost

"$DRIVER" "$PORT" 2 6 >/dev/null 2>&1 || die "$DRIVER could not load the backend's library"
cat >"$WORK/probes.lua" <<'EOF'
#!lua name=probes
local function times10(f) return function(k, a) for i = 1, 10 do f(k, a, i) end return 0 end end
redis.register_function('p_empty', function(k, a) return 0 end)
redis.register_function('p_loop', times10(function(k, a, i) end))
redis.register_function('p_hget', times10(function(k, a, i) redis.call('HGET', k[1], 'b') end))
redis.register_function('p_hmget5', times10(function(k, a, i)
  redis.call('HMGET', k[1], 'ttr', 'k', 'b', 'p', 'rs') end))
redis.register_function('p_hset6', times10(function(k, a, i)
  redis.call('HSET', k[1], 'b', a[1], 's', 'r', 'p', '1024', 'due', '1763791234567',
             'c', '1763791234567', 'ttr', '60000') end))
redis.register_function('p_table6', times10(function(k, a, i)
  local t = {R = k[1], D = k[1], U = k[1], now = i, woke = false, counts = {}} end))
redis.register_function('p_concat', times10(function(k, a, i) local t = k[1] .. i end))
redis.register_function('p_format', times10(function(k, a, i) local t = string.format('%013d', i) end))
EOF
redis-cli -p "$PORT" -x FUNCTION LOAD REPLACE <"$WORK/probes.lua" >/dev/null || die "cannot load the probes"
BODY=0123456789012345678901234567890123456789012345678901234567890123
redis-cli -p "$PORT" HSET probe:h b "$BODY" s r p 1024 due 1763791234567 c 1763791234567 ttr 60000 >/dev/null

counted=0
per_call=0
# measure <command...>: sets per_call to the instructions per call of the
# command (no subshell: `counted` must carry over).
measure() {
  callgrind_control -i on "$SERVER_PID" >/dev/null 2>&1
  redis-benchmark -p "$PORT" -n "$CALLS" -c 1 -q "$@" >/dev/null 2>&1 || die "redis-benchmark failed: $*"
  callgrind_control -i off "$SERVER_PID" >/dev/null 2>&1
  callgrind_control -d "$SERVER_PID" >/dev/null 2>&1
  local total
  total=$(cat "$WORK"/callgrind.* | awk '$1 == "totals:" || $1 == "summary:" { s += $2 } END { printf "%.0f", s }')
  per_call=$(((total - counted) / CALLS))
  counted=$total
}
# probe <name> <function> [args]: a probe's work per time (see above).
probe() {
  measure FCALL "$2" 1 probe:h "${@:3}"
  echo "redis_op_instructions_$1: $(((per_call - loop) / 10))"
}

echo "redis_op_cost: $CALLS calls of each command under callgrind" >&2
measure PING
echo "redis_op_instructions_ping: $per_call"
measure FCALL p_empty 1 probe:h
echo "redis_op_instructions_fcall_empty: $per_call"
measure FCALL p_loop 1 probe:h
loop=$per_call
probe call_hget p_hget
probe call_hmget5 p_hmget5
probe call_hset6 p_hset6 "$BODY"
probe lua_table6 p_table6
probe lua_concat p_concat
probe lua_format p_format
P='dq:{probe}:'
KEYS=(6 "${P}ready" "${P}delayed" "${P}reserved" "${P}buried" "${P}keys" "${P}topic")
# The prefix, then the topic's number and the number its first call gives it
# (src/backend/redis_scripts.h).
# (A pause of 0 gives the topic its incarnation, number 1, as an empty
# topic had before the incarnations, which calls then name.)
redis-cli -p "$PORT" FCALL dq_pause "${KEYS[@]}" "$P" 1/1 0 >/dev/null
measure FCALL dq_tick "${KEYS[@]}" "$P" 1
echo "redis_op_instructions_dq_tick: $per_call"
measure FCALL dq_put "${KEYS[@]}" "$P" 1 "$BODY" 1024 0 60000
echo "redis_op_instructions_dq_put: $per_call"
redis-cli -p "$PORT" shutdown nosave >/dev/null 2>&1 || true
wait "$SERVER_PID" 2>/dev/null || true
SERVER_PID=""
