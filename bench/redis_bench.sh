#!/usr/bin/env bash
# redis_bench.sh: delayqd on the Redis backend against delayqd on its Local
# backend, and against the sorted-set delay queue of the usual recipe
# (bench/zset_queue.cc), in one run.
#
#   bash bench/redis_bench.sh [BUILD_DIR]        (default: build)
#
# Measurements (build/loadgen, beanstalkd protocol):
#   lifecycle c50   put -> reserve -> delete, 50 connections, one request in
#                   flight each: delayqd Local (its defaults: RocksDB,
#                   fsync everysec); delayqd on Redis, one instance; and two
#                   instances on the same Redis, each driven by a loadgen of
#                   25 connections at once (their jobs/s summed).
#                   Redis keeps an AOF with appendfsync everysec (the
#                   durability that matches delayqd's default).
#   lateness        at each rate R of BENCH_LATENESS_RATES (default "2000 5000"):
#                   2 producers put R jobs/s for BENCH_LATENESS_SECONDS with
#                   delays spread over 1..2000 ms (put-ex, millisecond delays);
#                   BENCH_LATENESS_WORKERS (32) workers block in reserve and
#                   delete each job; lateness =
#                   RESERVED arrival - the due time the producer asked for.
#                   Local, and Redis (one instance).
#   zset            build/zset_queue at the same rates and delays: ZADD, and
#                   one poller doing ZRANGEBYSCORE + ZREM, sleeping
#                   BENCH_ZSET_POLL_MS (default 1000) unless its batch of 100
#                   came back full.
#   memory          BENCH_MEMORY_JOBS (100000; 0: skip) jobs with 64-byte
#                   bodies delayed by an hour, put through one instance:
#                   Redis's used_memory per job held.
# Each throughput figure is the best of BENCH_ROUNDS rounds; each round
# starts from an empty Redis (FLUSHALL) or a fresh data directory.
#
# Output: `name: value` lines on stdout, the headline
# `redis2_vs_local_lifecycle_c50` last; progress on stderr.
# Knobs: BENCH_SECONDS (2), BENCH_WARMUP (0.5), BENCH_ROUNDS (2),
# BENCH_LATENESS_SECONDS (3), BENCH_LATENESS_RATES ("2000 5000"), BENCH_LATENESS_WORKERS (32), BENCH_ZSET_POLL_MS
# (1000), BENCH_MEMORY_JOBS (100000), REDIS_SERVER (/usr/bin/redis-server).
set -euo pipefail

BUILD_DIR=${1:-build}
LOADGEN=$BUILD_DIR/loadgen
DELAYQD=$BUILD_DIR/delayqd
ZSET=$BUILD_DIR/zset_queue
REDIS_SERVER=${REDIS_SERVER:-/usr/bin/redis-server}
SECS=${BENCH_SECONDS:-2}
WARMUP=${BENCH_WARMUP:-0.5}
ROUNDS=${BENCH_ROUNDS:-2}
LAT_SECS=${BENCH_LATENESS_SECONDS:-3}
LAT_RATES=${BENCH_LATENESS_RATES:-2000 5000}
LAT_WORKERS=${BENCH_LATENESS_WORKERS:-32}
ZSET_POLL=${BENCH_ZSET_POLL_MS:-1000}
MEM_JOBS=${BENCH_MEMORY_JOBS:-100000}

die() { echo "redis_bench: $*" >&2; exit 1; }
for f in "$LOADGEN" "$DELAYQD" "$ZSET"; do [[ -x $f ]] || die "$f not found (make build)"; done
[[ -x $REDIS_SERVER ]] || die "$REDIS_SERVER not found (Debian: apt-get install redis-server)"
command -v redis-cli >/dev/null || die "redis-cli not found (Debian: apt-get install redis-tools)"

WORK=$(mktemp -d "${TMPDIR:-/tmp}/redis_bench.XXXXXX")
SERVER_PID=""
REDIS_PID=""
REDIS_PORT=""
DQ_PIDS=()
DQ_PORTS=()

# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

stop_all() {
  for pid in "${DQ_PIDS[@]}"; do
    SERVER_PID=$pid
    stop_server 1
  done
  DQ_PIDS=()
  DQ_PORTS=()
}
cleanup() {
  stop_all
  if [[ -n $REDIS_PID ]]; then
    SERVER_PID=$REDIS_PID
    stop_server 2
  fi
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

start_redis() {
  REDIS_PORT=$(free_port)
  mkdir -p "$WORK/redis"
  "$REDIS_SERVER" --port "$REDIS_PORT" --bind 127.0.0.1 --dir "$WORK/redis" --save "" \
    --appendonly yes --appendfsync everysec --daemonize no --protected-mode no \
    --logfile "$WORK/redis/redis.log" &
  REDIS_PID=$!
  for _ in $(seq 250); do
    [[ $(redis-cli -p "$REDIS_PORT" ping 2>/dev/null) == PONG ]] && return 0
    sleep 0.02
  done
  die "redis-server did not answer on port $REDIS_PORT"
}

# start_dq <delayqd flags...>: one more instance; appends to DQ_PIDS/DQ_PORTS.
start_dq() {
  local port log
  port=$(free_port)
  log=$WORK/delayqd.$port.log
  # shellcheck disable=SC2068
  "$DELAYQD" -l 127.0.0.1 -p "$port" --no-http --log-level warn $@ >"$log" 2>&1 &
  local pid=$!
  for _ in $(seq 250); do
    kill -0 "$pid" 2>/dev/null || { tail -5 "$log" >&2; die "delayqd exited at start-up"; }
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
      DQ_PIDS+=("$pid")
      DQ_PORTS+=("$port")
      return 0
    fi
    sleep 0.02
  done
  die "delayqd did not accept on port $port"
}

value_of() {  # value_of <name> <output>
  awk -F': ' -v k="$1" '$1 == k { print $2; exit }' <<<"$2"
}
best() {  # best <old> <new>: the larger (n/a counts as nothing)
  if [[ $1 == n/a ]]; then echo "$2"; elif [[ $2 == n/a ]]; then echo "$1"; else
    awk -v a="$1" -v b="$2" 'BEGIN { print (b > a ? b : a) }'; fi
}
lower() {  # lower <old> <new>: the smaller
  if [[ $1 == n/a ]]; then echo "$2"; elif [[ $2 == n/a ]]; then echo "$1"; else
    awk -v a="$1" -v b="$2" 'BEGIN { print (b < a ? b : a) }'; fi
}
ratio() {
  if [[ $1 == n/a || $2 == n/a ]]; then echo n/a; else
    awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f\n", a / b; else print "n/a" }'; fi
}

LIFE="--mode lifecycle --seconds $SECS --warmup $WARMUP --tube bench"
local_c50=n/a redis1_c50=n/a redis2_c50=n/a
declare -A L=()  # L[<who>_<rate>_p50|p99] = best round (lowest p99)

start_redis
echo "redis_bench: $(nproc) cpus, load average $(cut -d' ' -f1-3 /proc/loadavg); redis $("$REDIS_SERVER" --version | awk '{print $3}')" >&2
for round in $(seq "$ROUNDS"); do
  # Local: a fresh data directory.
  rm -rf "$WORK/local"
  start_dq -b "$WORK/local"
  # shellcheck disable=SC2086
  out=$("$LOADGEN" --port "${DQ_PORTS[0]}" --connections 50 $LIFE 2>/dev/null) || true
  v=$(value_of jobs_per_s "$out"); v=${v:-n/a}
  echo "redis_bench: round $round local  lifecycle c50: $v jobs/s" >&2
  local_c50=$(best "$local_c50" "$v")
  stop_all

  # Redis, one instance.
  redis-cli -p "$REDIS_PORT" flushall >/dev/null
  start_dq --backend "redis://127.0.0.1:$REDIS_PORT"
  # shellcheck disable=SC2086
  out=$("$LOADGEN" --port "${DQ_PORTS[0]}" --connections 50 $LIFE 2>/dev/null) || true
  v=$(value_of jobs_per_s "$out"); v=${v:-n/a}
  echo "redis_bench: round $round redis1 lifecycle c50: $v jobs/s" >&2
  redis1_c50=$(best "$redis1_c50" "$v")
  stop_all

  # Redis, two instances, 25 connections each, at once.
  redis-cli -p "$REDIS_PORT" flushall >/dev/null
  start_dq --backend "redis://127.0.0.1:$REDIS_PORT"
  start_dq --backend "redis://127.0.0.1:$REDIS_PORT"
  # shellcheck disable=SC2086
  "$LOADGEN" --port "${DQ_PORTS[0]}" --connections 25 $LIFE >"$WORK/a.out" 2>/dev/null &
  a=$!
  # shellcheck disable=SC2086
  "$LOADGEN" --port "${DQ_PORTS[1]}" --connections 25 $LIFE >"$WORK/b.out" 2>/dev/null &
  b=$!
  wait "$a" || true
  wait "$b" || true
  va=$(value_of jobs_per_s "$(cat "$WORK/a.out")")
  vb=$(value_of jobs_per_s "$(cat "$WORK/b.out")")
  if [[ -n $va && -n $vb ]]; then v=$((va + vb)); else v=n/a; fi
  echo "redis_bench: round $round redis2 lifecycle c50: $v jobs/s ($va + $vb)" >&2
  redis2_c50=$(best "$redis2_c50" "$v")
  stop_all
done

# Lateness: the lowest p99 of ROUNDS rounds is kept, with its p50.
keep_lateness() {  # keep_lateness <who> <rate> <loadgen or zset output>
  local p50 p99
  p50=$(value_of lateness_p50_ms "$3")
  p99=$(value_of lateness_p99_ms "$3")
  echo "redis_bench: $1 at $2 jobs/s: lateness p50 ${p50:-n/a} ms p99 ${p99:-n/a} ms" >&2
  [[ -n $p99 ]] || return 0
  local old=${L[$1_$2_p99]:-n/a}
  if [[ $old == n/a || $(lower "$old" "$p99") == "$p99" ]]; then
    L[$1_$2_p50]=$p50
    L[$1_$2_p99]=$p99
  fi
}
for rate in $LAT_RATES; do
  LATE="--mode lateness --connections $LAT_WORKERS --producers 2 --rate $rate --seconds $LAT_SECS"
  LATE="$LATE --max-delay-ms 2000 --protocol-ms --tube late"
  for round in $(seq "$ROUNDS"); do
    rm -rf "$WORK/local"
    start_dq -b "$WORK/local"
    # shellcheck disable=SC2086
    out=$("$LOADGEN" --port "${DQ_PORTS[0]}" $LATE 2>/dev/null) || true
    stop_all
    keep_lateness local "$rate" "$out"

    redis-cli -p "$REDIS_PORT" flushall >/dev/null
    start_dq --backend "redis://127.0.0.1:$REDIS_PORT"
    # shellcheck disable=SC2086
    out=$("$LOADGEN" --port "${DQ_PORTS[0]}" $LATE 2>/dev/null) || true
    stop_all
    keep_lateness redis "$rate" "$out"
  done
  redis-cli -p "$REDIS_PORT" flushall >/dev/null
  out=$("$ZSET" --port "$REDIS_PORT" --rate "$rate" --seconds "$LAT_SECS" --max-delay-ms 2000 \
    --poll-ms "$ZSET_POLL" 2>/dev/null) || true
  keep_lateness zset "$rate" "$out"
done

# Memory: what Redis holds per waiting job. BENCH_MEMORY_JOBS (100,000) jobs
# with 64-byte bodies, delayed by an hour, put through one instance;
# used_memory after minus before, divided by the jobs Redis holds.
used_memory() {
  redis-cli -p "$REDIS_PORT" info memory | awk -F: '$1 == "used_memory" { print $2 + 0 }'
}
mem_per_job=n/a
if [[ $MEM_JOBS -gt 0 ]]; then
  redis-cli -p "$REDIS_PORT" flushall >/dev/null
  start_dq --backend "redis://127.0.0.1:$REDIS_PORT"
  before=$(used_memory)
  "$LOADGEN" --port "${DQ_PORTS[0]}" --connections 10 --mode put --jobs "$MEM_JOBS" --delay-s 3600 \
    --tube memory >/dev/null 2>&1 || true
  after=$(used_memory)
  held=$(redis-cli -p "$REDIS_PORT" zcard 'dq:{memory}:delayed')
  stop_all
  if [[ $held -gt 0 ]]; then mem_per_job=$(((after - before) / held)); fi
  echo "redis_bench: $held delayed jobs, Redis used_memory +$((after - before)) bytes" >&2
fi

echo "redis_bench_rounds: $ROUNDS"
echo "redis_bench_seconds_per_round: $SECS"
echo "local_lifecycle_c50_jobs_per_s: $local_c50"
echo "redis1_lifecycle_c50_jobs_per_s: $redis1_c50"
echo "redis2_lifecycle_c50_jobs_per_s: $redis2_c50"
echo "redis1_vs_local_lifecycle_c50: $(ratio "$redis1_c50" "$local_c50")"
echo "redis_bytes_per_delayed_job: $mem_per_job"
echo "zset_poll_ms: $ZSET_POLL"
for rate in $LAT_RATES; do
  for who in local redis zset; do
    echo "${who}_lateness_p50_ms_at_${rate}: ${L[${who}_${rate}_p50]:-n/a}"
    echo "${who}_lateness_p99_ms_at_${rate}: ${L[${who}_${rate}_p99]:-n/a}"
  done
done
echo "redis2_vs_local_lifecycle_c50: $(ratio "$redis2_c50" "$local_c50")"
