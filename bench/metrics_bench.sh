#!/usr/bin/env bash
# metrics_bench.sh: what GET /metrics and the counting behind it cost
# (docs/operations.md, "What watching costs"). Every delayqd is fresh and in
# memory, with 10,000 idle topics (one ready job each) beside the
# benchmark's own.
#
#   bash bench/metrics_bench.sh [BUILD_DIR] [NO_COUNT_BUILD_DIR]
#
# Measurements:
#   scrape_10k_topics_ms_{median,max}       one scrape as curl sees it over
#                                           loopback (request to last byte),
#                                           BENCH_SCRAPES of them (default
#                                           --metrics-max-topics: 100 topics
#                                           labelled, the rest summed)
#   scrape_10k_topics_all_labelled_ms_{median,max}  the same with
#                                           --metrics-max-topics 10000
#   scrape_bytes, scrape_all_labelled_bytes the size of each
#   lifecycle_c50_{quiet,scraped}_jobs_per_s  build/loadgen, lifecycle, 50
#                                           connections, without and with a
#                                           scrape every second
#   scraped_vs_quiet_lifecycle_c50          their ratio: the median of the
#                                           rounds' pairs (target >= 0.98)
#   lifecycle_c50_{counting,not_counting}_jobs_per_s, counting_vs_not_lifecycle_c50
#       only with NO_COUNT_BUILD_DIR: a delayqd built with
#       -DDELAYQ_COUNT_METRICS=OFF (no lateness histograms, no operation
#       outcome counters) against BUILD_DIR's (target >= 0.97);
#       counting_vs_not_cpu_per_job_c50: delayqd's CPU per job, the same
#       pairs (steadier than the rates on a shared 2-core machine)
#   {counting,not_counting}_instructions_per_job, counting_vs_not_instructions
#       only with NO_COUNT_BUILD_DIR and Valgrind: delayqd's instructions per
#       job under callgrind (--busy-poll-us 0), lifecycle at 50 connections:
#       the instructions of a 12-second run less those of a 4-second one,
#       over the jobs of the one less the other (so that start and stop
#       cancel out), the median of BENCH_CALLGRIND_ROUNDS (3) of each build.
#       Counts, not times: the machine's load does not move them.
#   *_cpu_us_per_job                        delayqd's CPU time per job of
#                                           each set-up (median)
# Each pair is measured back to back, its order alternating by round.
# Output: `name: value` lines on stdout; progress on stderr. Knobs:
# BENCH_SECONDS (3), BENCH_WARMUP (0.5), BENCH_ROUNDS (5), BENCH_SCRAPES (50),
# BENCH_CALLGRIND_ROUNDS (3; 0: none).
set -euo pipefail

BUILD_DIR=${1:-build}
NOCOUNT_DIR=${2:-}
LOADGEN=$BUILD_DIR/loadgen
SECS=${BENCH_SECONDS:-3}
WARMUP=${BENCH_WARMUP:-0.5}
ROUNDS=${BENCH_ROUNDS:-5}
SCRAPES=${BENCH_SCRAPES:-50}
TOPICS=10000

die() { echo "metrics_bench: $*" >&2; exit 1; }
for b in "$BUILD_DIR/delayqd" "$LOADGEN"; do [[ -x $b ]] || die "$b not found (make build)"; done
[[ -z $NOCOUNT_DIR || -x $NOCOUNT_DIR/delayqd ]] || die "$NOCOUNT_DIR/delayqd not found"
command -v curl >/dev/null || die "curl not found"

WORK=$(mktemp -d "${TMPDIR:-/tmp}/metrics_bench.XXXXXX")
SERVER_PID=""
SCRAPER_PID=""
BEAN_PORT=""
HTTP_PORT=""
# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
stop_scraper() {
  if [[ -n $SCRAPER_PID ]]; then
    kill "$SCRAPER_PID" 2>/dev/null || true
    wait "$SCRAPER_PID" 2>/dev/null || true
    SCRAPER_PID=""
  fi
}
cleanup() { stop_scraper; stop_server 1; rm -rf "$WORK"; }
trap cleanup EXIT
trap 'exit 130' INT TERM

# start BINARY_DIR [DELAYQD_FLAG...]: a fresh delayqd with $TOPICS topics of
# one ready job each, put over one connection in batches of 500.
start() {
  local dir=$1
  shift
  DELAYQD=$dir/delayqd start_delayqd_two_ports "$@"
  exec 3<>"/dev/tcp/127.0.0.1/$BEAN_PORT"
  local i b line
  for ((b = 0; b < TOPICS; b += 500)); do
    for ((i = b; i < b + 500 && i < TOPICS; i++)); do
      printf 'use idle.%d\r\nput 0 0 60 1\r\nx\r\n' "$i"
    done >&3
    for ((i = b; i < b + 500 && i < TOPICS; i++)); do
      IFS= read -r line <&3 || die "no reply to use"
      IFS= read -r line <&3 || die "no reply to put"
      [[ $line == INSERTED* ]] || die "put: $line"
    done
  done
  exec 3<&-
}

value_of() { sed -n "s/^$1: //p" <<<"$2"; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", (b > 0 ? a / b : 0) }'; }

# scrape_times NAME: BENCH_SCRAPES scrapes, their times in ms on stdout.
scrape_times() {
  local i t
  for ((i = 0; i < SCRAPES; i++)); do
    t=$(curl -s -o "$WORK/scrape.txt" -w '%{time_total}' "http://127.0.0.1:$HTTP_PORT/metrics") ||
      die "scrape failed"
    awk -v t="$t" 'BEGIN { printf "%.2f\n", t * 1000 }'
  done
}

# ---- 1. one scrape, 10,000 topics ---------------------------------------------
for labelled in default all; do
  if [[ $labelled == all ]]; then
    start "$BUILD_DIR" --metrics-max-topics $TOPICS
    name=scrape_10k_topics_all_labelled
  else
    start "$BUILD_DIR"
    name=scrape_10k_topics
  fi
  echo "metrics_bench: $name ($SCRAPES scrapes)" >&2
  times=$(scrape_times)
  echo "${name}_ms_median: $(median "$times")"
  echo "${name}_ms_max: $(sort -n <<<"$times" | tail -1)"
  grep -q '^delayq_topic_jobs{' "$WORK/scrape.txt" || die "no delayq_topic_jobs in the scrape"
  if [[ $labelled == all ]]; then
    echo "scrape_all_labelled_bytes: $(wc -c <"$WORK/scrape.txt")"
  else
    echo "scrape_bytes: $(wc -c <"$WORK/scrape.txt")"
  fi
  stop_server 1
done

# ---- 2. and 3. lifecycle at 50 connections, paired rounds ---------------------------
declare -A RUNS LAST CPU LASTCPU
CLK_TCK=$(getconf CLK_TCK)
# utime + stime of a process, in clock ticks (proc(5): fields 14, 15).
cpu_ticks() {
  local stat
  stat=$(cat "/proc/$1/stat") || die "no process $1"
  stat=${stat##*) }
  # shellcheck disable=SC2086
  set -- $stat
  echo $((${12} + ${13}))
}
# run NAME BINARY_DIR scraped|quiet
run() {
  local name=$1 dir=$2 how=$3 out
  start "$dir"
  if [[ $how == scraped ]]; then
    (while :; do curl -s -o /dev/null "http://127.0.0.1:$HTTP_PORT/metrics"; sleep 1; done) &
    SCRAPER_PID=$!
  fi
  local t0 t1
  t0=$(cpu_ticks "$SERVER_PID")
  out=$("$LOADGEN" --port "$BEAN_PORT" --tube bench --connections 50 --mode lifecycle \
    --seconds "$SECS" --warmup "$WARMUP" 2>"$WORK/err") || { cat "$WORK/err" >&2; die "$name"; }
  t1=$(cpu_ticks "$SERVER_PID")
  stop_scraper
  stop_server 1
  local v us
  v=$(value_of jobs_per_s "$out")
  v=${v%.*}
  # delayqd's CPU per job: its CPU over the whole run (warm-up included)
  # over the jobs of the whole run, at the measured rate.
  us=$(awk -v t=$((t1 - t0)) -v hz="$CLK_TCK" -v r="$v" -v s="$SECS" -v w="$WARMUP" \
    'BEGIN { printf "%.2f", (r > 0 ? 1e6 * t / hz / (r * (s + w)) : 0) }')
  echo "metrics_bench: $name round: $v jobs/s, delayqd $us us CPU/job" >&2
  RUNS[$name]="${RUNS[$name]:-} $v"
  LAST[$name]=$v
  CPU[$name]="${CPU[$name]:-} $us"
  LASTCPU[$name]=$us
}

PAIRS_SCRAPE=""
PAIRS_COUNT=""
PAIRS_COUNT_CPU=""
for round in $(seq "$ROUNDS"); do
  if ((round % 2)); then order=(quiet scraped); else order=(scraped quiet); fi
  for how in "${order[@]}"; do run "lifecycle_c50_${how}_jobs_per_s" "$BUILD_DIR" "$how"; done
  PAIRS_SCRAPE+=" $(ratio "${LAST[lifecycle_c50_scraped_jobs_per_s]}" "${LAST[lifecycle_c50_quiet_jobs_per_s]}")"
  if [[ -n $NOCOUNT_DIR ]]; then
    if ((round % 2)); then order=(counting not_counting); else order=(not_counting counting); fi
    for how in "${order[@]}"; do
      dir=$BUILD_DIR
      [[ $how == not_counting ]] && dir=$NOCOUNT_DIR
      run "lifecycle_c50_${how}_jobs_per_s" "$dir" quiet
    done
    PAIRS_COUNT+=" $(ratio "${LAST[lifecycle_c50_counting_jobs_per_s]}" \
      "${LAST[lifecycle_c50_not_counting_jobs_per_s]}")"
    PAIRS_COUNT_CPU+=" $(ratio "${LASTCPU[lifecycle_c50_counting_jobs_per_s]}" \
      "${LASTCPU[lifecycle_c50_not_counting_jobs_per_s]}")"
  fi
done

for k in $(printf '%s\n' "${!RUNS[@]}" | sort); do
  echo "$k: $(median "${RUNS[$k]}")"
  echo "${k%_jobs_per_s}_cpu_us_per_job: $(median "${CPU[$k]}")"
done
echo "scraped_vs_quiet_lifecycle_c50_pairs:$PAIRS_SCRAPE"
echo "scraped_vs_quiet_lifecycle_c50: $(median "$PAIRS_SCRAPE")"
if [[ -n $NOCOUNT_DIR ]]; then
  echo "counting_vs_not_lifecycle_c50_pairs:$PAIRS_COUNT"
  echo "counting_vs_not_cpu_per_job_c50_pairs:$PAIRS_COUNT_CPU"
  echo "counting_vs_not_cpu_per_job_c50: $(median "$PAIRS_COUNT_CPU")"
  echo "counting_vs_not_lifecycle_c50: $(median "$PAIRS_COUNT")"
fi

# ---- 4. instructions per job, counting and not ---------------------------------
CG_ROUNDS=${BENCH_CALLGRIND_ROUNDS:-3}
if [[ -z $NOCOUNT_DIR || $CG_ROUNDS == 0 ]]; then
  exit 0
elif ! command -v valgrind >/dev/null; then
  echo "metrics_bench: no valgrind: no instruction counts" >&2
  exit 0
fi
# cg_run BINARY_DIR SECONDS: "instructions jobs" of one run under callgrind.
cg_run() {
  local out=$WORK/callgrind.out jobs
  BEAN_PORT=$(free_port)
  valgrind --tool=callgrind --callgrind-out-file="$out" "$1/delayqd" -l 127.0.0.1 \
    -p "$BEAN_PORT" --http-port 0 --in-memory --log-level warn --busy-poll-us 0 \
    >"$WORK/delayqd.log" 2>&1 &
  SERVER_PID=$!
  for _ in $(seq 600); do
    (exec 3<>"/dev/tcp/127.0.0.1/$BEAN_PORT") 2>/dev/null && break
    kill -0 "$SERVER_PID" 2>/dev/null || die "delayqd under callgrind exited"
    sleep 0.1
  done
  jobs=$("$LOADGEN" --port "$BEAN_PORT" --tube bench --connections 50 --mode lifecycle \
    --seconds "$2" --warmup 0 2>"$WORK/err" | sed -n 's/^jobs: //p') || die "loadgen: $(cat "$WORK/err")"
  stop_server 60  # callgrind writes its profile on the way out
  echo "$(sed -n 's/^summary: //p; s/^totals: //p' "$out" | head -1 | cut -d' ' -f1) $jobs"
}
declare -A INSTR
for round in $(seq "$CG_ROUNDS"); do
  for how in counting not_counting; do
    dir=$BUILD_DIR
    [[ $how == not_counting ]] && dir=$NOCOUNT_DIR
    read -r i1 j1 < <(cg_run "$dir" 4)
    read -r i2 j2 < <(cg_run "$dir" 12)
    ((j2 > j1)) || die "callgrind runs: $j1 and $j2 jobs"
    per=$(((i2 - i1) / (j2 - j1)))
    echo "metrics_bench: $how under callgrind: $per instructions/job ($((j2 - j1)) jobs)" >&2
    INSTR[$how]="${INSTR[$how]:-} $per"
  done
done
for how in counting not_counting; do
  echo "${how}_instructions_per_job: $(median "${INSTR[$how]}")"
done
echo "counting_vs_not_instructions: $(ratio "$(median "${INSTR[counting]}")" \
  "$(median "${INSTR[not_counting]}")")"
