#!/usr/bin/env bash
# http_bench.sh: delayqd's HTTP/JSON API against its own beanstalkd protocol,
# in one run: the same delayqd build, fresh for every measurement
# (--in-memory), loaded through build/http_loadgen (HTTP/1.1, keep-alive) and
# build/loadgen (beanstalkd protocol).
#
#   bash bench/http_bench.sh [BUILD_DIR]        (default: build)
#
# Measurements (each the best of BENCH_ROUNDS rounds, the two protocols
# alternating):
#   put c=50         put-only, 50 connections, one request in flight each
#   lifecycle c=50   put -> reserve -> finish (HTTP) / delete (beanstalkd)
#   long-poll        BENCH_LONGPOLL_WAITERS connections wait in a reserve;
#                    one more puts BENCH_LONGPOLL_JOBS jobs one at a time;
#                    wake-up = put sent -> the long-poll's reply arrives
#
# Output: `name: value` lines on stdout, the headline
# `http_put_vs_beanstalk_put_c50` (HTTP put rate / beanstalkd-protocol put
# rate) last; progress on stderr. Knobs: BENCH_SECONDS (2), BENCH_WARMUP
# (0.5), BENCH_ROUNDS (2), BENCH_LONGPOLL_WAITERS (8), BENCH_LONGPOLL_JOBS
# (2000), BENCH_DELAYQD_ARGS (extra delayqd flags).
set -euo pipefail

BUILD_DIR=${1:-build}
DELAYQD=$BUILD_DIR/delayqd
LOADGEN=$BUILD_DIR/loadgen
HTTP_LOADGEN=$BUILD_DIR/http_loadgen
SECS=${BENCH_SECONDS:-2}
WARMUP=${BENCH_WARMUP:-0.5}
ROUNDS=${BENCH_ROUNDS:-2}
LP_WAITERS=${BENCH_LONGPOLL_WAITERS:-8}
LP_JOBS=${BENCH_LONGPOLL_JOBS:-2000}
DELAYQD_ARGS=${BENCH_DELAYQD_ARGS:-}

die() { echo "http_bench: $*" >&2; exit 1; }
for b in "$DELAYQD" "$LOADGEN" "$HTTP_LOADGEN"; do
  [[ -x $b ]] || die "$b not found (make build)"
done

WORK=$(mktemp -d "${TMPDIR:-/tmp}/http_bench.XXXXXX")
SERVER_PID=""
BEAN_PORT=""
HTTP_PORT=""
# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cleanup() { stop_server 1; rm -rf "$WORK"; }
trap cleanup EXIT
trap 'exit 130' INT TERM

start_delayqd() {
  # shellcheck disable=SC2086
  start_delayqd_two_ports $DELAYQD_ARGS
}

value_of() { sed -n "s/^$1: //p" <<<"$2"; }

declare -A BEST
# keep_best <name> <value> <higher|lower>
keep_best() {
  local cur=${BEST[$1]:-}
  if [[ -z $cur ]] || { [[ $3 == higher ]] && (($2 > cur)); } ||
    { [[ $3 == lower ]] && (($2 < cur)); }; then
    BEST[$1]=$2
  fi
}

# run <name> <beanstalk|http> <mode>
run() {
  local name=$1 proto=$2 mode=$3 out
  start_delayqd
  if [[ $proto == beanstalk ]]; then
    out=$("$LOADGEN" --port "$BEAN_PORT" --tube bench --connections 50 --mode "$mode" \
      --seconds "$SECS" --warmup "$WARMUP" 2>"$WORK/err") || { cat "$WORK/err" >&2; die "$name"; }
  else
    out=$("$HTTP_LOADGEN" --port "$HTTP_PORT" --connections 50 --mode "$mode" \
      --seconds "$SECS" --warmup "$WARMUP" 2>"$WORK/err") || { cat "$WORK/err" >&2; die "$name"; }
  fi
  stop_server 1
  local v
  v=$(value_of jobs_per_s "$out")
  echo "http_bench: $name round: $v jobs/s (p99 $(value_of latency_p99_us "$out") us)" >&2
  keep_best "$name" "${v%.*}" higher
}

for round in $(seq "$ROUNDS"); do
  if ((round % 2)); then order=(beanstalk http); else order=(http beanstalk); fi
  for p in "${order[@]}"; do
    run "${p}_put_c50_jobs_per_s" "$p" put
    run "${p}_lifecycle_c50_jobs_per_s" "$p" lifecycle
  done
  start_delayqd
  out=$("$HTTP_LOADGEN" --port "$HTTP_PORT" --connections "$LP_WAITERS" --mode longpoll \
    --jobs "$LP_JOBS" 2>"$WORK/err") || { cat "$WORK/err" >&2; die "longpoll"; }
  stop_server 1
  echo "http_bench: longpoll round: p50 $(value_of wakeup_p50_us "$out") us, p99 $(value_of wakeup_p99_us "$out") us" >&2
  keep_best http_longpoll_wakeup_p50_us "$(value_of wakeup_p50_us "$out")" lower
  keep_best http_longpoll_wakeup_p99_us "$(value_of wakeup_p99_us "$out")" lower
done

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }'; }
for k in beanstalk_put_c50_jobs_per_s http_put_c50_jobs_per_s beanstalk_lifecycle_c50_jobs_per_s \
  http_lifecycle_c50_jobs_per_s http_longpoll_wakeup_p50_us http_longpoll_wakeup_p99_us; do
  echo "$k: ${BEST[$k]}"
done
echo "http_lifecycle_vs_beanstalk_lifecycle_c50: $(ratio "${BEST[http_lifecycle_c50_jobs_per_s]}" "${BEST[beanstalk_lifecycle_c50_jobs_per_s]}")"
echo "http_put_vs_beanstalk_put_c50: $(ratio "${BEST[http_put_c50_jobs_per_s]}" "${BEST[beanstalk_put_c50_jobs_per_s]}")"
