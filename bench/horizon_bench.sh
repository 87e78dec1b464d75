#!/usr/bin/env bash
# horizon_bench.sh: what the horizon is for (issue 4, item 8): memory per
# job with many jobs delayed far ahead, and the restart time with many jobs
# on disk. delayqd runs durable (its default store, a fresh data directory);
# Debian's beanstalkd (in memory) is filled the same way for a ratio.
#
#   bash bench/horizon_bench.sh [BUILD_DIR]       (default: build)
#   HORIZON_BENCH_JOBS=200000 HORIZON_BENCH_READY=20000 bash bench/horizon_bench.sh build
#
# Memory: a fresh server on a free loopback port is filled by build/loadgen
# (pipelined classic puts, --delay-s) with HORIZON_BENCH_JOBS jobs of 64-byte
# random bodies, each delayed by HORIZON_BENCH_DELAY_S (one day). VmRSS and
# VmHWM (peak) are read from /proc/PID/status before and after the fill;
# bytes per job = (RSS after - RSS of the idle server) / jobs. beanstalkd
# first (then stopped), then delayqd.
#
# Restart: delayqd, holding those jobs, is given HORIZON_BENCH_READY ready
# jobs (delay 0) on top, then
#   1. kill -9, restart on the same data directory;
#   2. SIGTERM (graceful; the stop time is measured too), restart again.
# Restart time = from just before the exec until a `reserve-with-timeout 0`
# (on a fresh connection watching the bench tube) answers RESERVED; the
# script polls connect + reserve every 10 ms. The time until the port first
# accepts is printed too, and the RSS once RESERVED came.
#
# Output: `name: value` lines on stdout, the headline `delayq_rss_mb` (total
# RSS after the delayed puts; target <= 256) last; progress on stderr. MB
# are MiB. Targets: delayq_rss_mb <= 256 at 10M jobs; each restart <= 10 s
# with 10M delayed + 1M ready jobs.
#
# Environment knobs: HORIZON_BENCH_JOBS (delayed jobs, default 10000000),
# HORIZON_BENCH_READY (ready jobs added for the restart, default 1000000),
# HORIZON_BENCH_DELAY_S (86400), HORIZON_BENCH_CONNECTIONS (16) and
# HORIZON_BENCH_DEPTH (256): the fill's connections and puts in flight per
# connection (delayqd's durable puts gain from more connections: about 60k/s
# at 4, 95k/s at 16 on 2 cores; beanstalkd does ~200k/s either way), HORIZON_BENCH_ONLY=memory (no ready jobs, no restarts) or
# =restart (no beanstalkd), HORIZON_BENCH_DELAYQD_ARGS (extra delayqd flags,
# e.g. "--horizon 5m"), HORIZON_BENCH_TIMEOUT (seconds allowed for one fill,
# one restart or one graceful stop; default 3600), BEANSTALKD
# (/usr/bin/beanstalkd). The data directory lives under TMPDIR (/tmp): put
# it on a real disk, not tmpfs.
set -euo pipefail
export LC_ALL=C  # EPOCHREALTIME and awk with a '.' decimal point

BUILD_DIR=${1:-build}
LOADGEN=$BUILD_DIR/loadgen
DELAYQD=$BUILD_DIR/delayqd
BEANSTALKD=${BEANSTALKD:-/usr/bin/beanstalkd}
JOBS=${HORIZON_BENCH_JOBS:-10000000}
READY=${HORIZON_BENCH_READY:-1000000}
DELAY_S=${HORIZON_BENCH_DELAY_S:-86400}
CONNS=${HORIZON_BENCH_CONNECTIONS:-16}
DEPTH=${HORIZON_BENCH_DEPTH:-256}
ONLY=${HORIZON_BENCH_ONLY:-}
DELAYQD_ARGS=${HORIZON_BENCH_DELAYQD_ARGS:-}
TIMEOUT=${HORIZON_BENCH_TIMEOUT:-3600}
TUBE=bench
BODY_SIZE=64

die() { echo "horizon_bench: $*" >&2; exit 1; }
say() { echo "horizon_bench: $*" >&2; }
[[ -x $LOADGEN ]] || die "$LOADGEN not found (build the loadgen target: make build)"
[[ -x $DELAYQD ]] || die "$DELAYQD not found (make build)"
[[ $JOBS =~ ^[0-9]+$ && $JOBS -gt 0 ]] || die "HORIZON_BENCH_JOBS must be a positive integer"
[[ $READY =~ ^[0-9]+$ && $READY -gt 0 ]] || die "HORIZON_BENCH_READY must be a positive integer"
case $ONLY in
  "" | memory | restart) ;;
  *) die "HORIZON_BENCH_ONLY must be memory or restart (or unset)" ;;
esac
if [[ $ONLY != restart && ! -x $BEANSTALKD ]]; then
  die "$BEANSTALKD not found (Debian: apt-get install beanstalkd; or set BEANSTALKD=)"
fi

WORK=$(mktemp -d "${TMPDIR:-/tmp}/horizon_bench.XXXXXX")
SERVER_PID=""
SERVER_PORT=""
FAILED=0

# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cleanup() { stop_server 1; rm -rf "$WORK"; }
trap cleanup EXIT
trap 'exit 130' INT TERM


now() { echo "$EPOCHREALTIME"; }
since() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.3f", b - a }'; }
mb() { awk -v k="$1" 'BEGIN { printf "%.1f", k / 1024 }'; }  # kB -> MiB

status_kb() {  # status_kb <pid> VmRSS|VmHWM
  awk -v k="$2:" '$1 == k { print $2; exit }' "/proc/$1/status" 2>/dev/null || echo 0
}

# exec_server beanstalkd|delayq <data dir>: starts it in the background on
# SERVER_PORT (log appended to $WORK/<which>.log), sets SERVER_PID.
exec_server() {
  local which=$1 dir=$2 log=$WORK/$1.log
  # shellcheck disable=SC2086  # DELAYQD_ARGS is a list of flags
  if [[ $which == beanstalkd ]]; then
    "$BEANSTALKD" -l 127.0.0.1 -p "$SERVER_PORT" >>"$log" 2>&1 &
  else
    "$DELAYQD" -l 127.0.0.1 -p "$SERVER_PORT" --no-http -b "$dir" --log-level info \
      $DELAYQD_ARGS >>"$log" 2>&1 &
  fi
  SERVER_PID=$!
}

# wait_accepting <which> <seconds>: until the port accepts; 1 if the server
# died or the time ran out.
# server_alive NAME LOG: fails, showing the end of LOG, once the server exited.
server_alive() {
  kill -0 "$SERVER_PID" 2>/dev/null && return 0
  say "$1 exited:"
  tail -5 "$2" >&2
  wait "$SERVER_PID" 2>/dev/null || true
  SERVER_PID=""
  return 1
}
# past T0 LIMIT: more than LIMIT seconds went by since T0.
past() { awk -v s="$(since "$1")" -v l="$2" 'BEGIN { exit !(s > l) }'; }

wait_accepting() {
  local which=$1 limit=$2 t0
  t0=$(now)
  for (( ; ; )); do
    server_alive "$which" "$WORK/$which.log" || return 1
    if (exec 3<>"/dev/tcp/127.0.0.1/$SERVER_PORT") 2>/dev/null; then return 0; fi
    if past "$t0" "$limit"; then
      say "$which did not accept on port $SERVER_PORT within $limit s"
      stop_server 1
      return 1
    fi
    sleep 0.02
  done
}

# probe: one connect + `reserve-with-timeout 0` on the bench tube.
# 0: RESERVED; 1: connection refused; 2: accepted, but no job (yet).
probe() (
  exec 2>/dev/null
  exec 3<>"/dev/tcp/127.0.0.1/$SERVER_PORT" || exit 1
  printf 'watch %s\r\nreserve-with-timeout 0\r\n' "$TUBE" >&3 || exit 2
  line=""
  read -r -t 30 line <&3 || exit 2  # WATCHING 2
  read -r -t 30 line <&3 || exit 2
  [[ $line == RESERVED* ]] && exit 0
  exit 2
)

# stat_of <name>: one value from the server's `stats`.
stat_of() (
  exec 2>/dev/null
  exec 3<>"/dev/tcp/127.0.0.1/$SERVER_PORT" || exit 0
  printf 'stats\r\n' >&3
  head="" yaml=""
  read -r -t 30 head <&3 || exit 0
  head=${head%$'\r'}
  [[ $head == OK\ * ]] || exit 0
  read -r -t 30 -N "$((${head#OK } + 2))" yaml <&3 || exit 0
  awk -F': ' -v k="$1" '$1 == k { sub(/\r$/, "", $2); print $2; exit }' <<<"$yaml"
)

value_of() {  # value_of <name> <loadgen output>
  awk -F': ' -v k="$1" '$1 == k { print $2; exit }' <<<"$2"
}

declare -A R=()

# fill <key> <jobs> <delay s>: pipelined puts into the running server;
# sets R[<key>_jobs_per_s] and R[<key>_seconds]. 1 on failure.
fill() {
  local key=$1 n=$2 delay=$3 out rc=0
  say "$key: putting $n jobs (delay ${delay} s, $CONNS connections x $DEPTH in flight)..."
  out=$("$LOADGEN" --port "$SERVER_PORT" --tube "$TUBE" --mode pipeline --connections "$CONNS" \
    --pipeline-depth "$DEPTH" --jobs "$n" --delay-s "$delay" --body-size "$BODY_SIZE" \
    --random-body --max-seconds "$TIMEOUT" 2>"$WORK/loadgen.err") || rc=$?
  if ((rc != 0)) || [[ $(value_of jobs "$out") != "$n" ]]; then
    say "$key: loadgen failed (exit $rc):"
    cat "$WORK/loadgen.err" >&2
    return 1
  fi
  R[${key}_jobs_per_s]=$(value_of jobs_per_s "$out")
  R[${key}_seconds]=$(value_of seconds "$out")
  say "$key: $n jobs in ${R[${key}_seconds]} s, ${R[${key}_jobs_per_s]} jobs/s" \
    "(loadgen cpu $(value_of client_cpu_percent "$out")%)"
}

# check_counts <what> <delayed> <ready>: the server's counts as expected?
check_counts() {
  local what=$1 d r u
  d=$(stat_of current-jobs-delayed)
  r=$(stat_of current-jobs-ready)
  u=$(stat_of current-jobs-reserved)  # a probe's job, until its close is seen
  say "$what: current-jobs-delayed ${d:-?}, current-jobs-ready ${r:-?}, current-jobs-reserved ${u:-?}"
  if [[ $d != "$2" || $((${r:-0} + ${u:-0})) != "$3" ]]; then
    say "$what: expected $2 delayed and $3 ready jobs"
    FAILED=1
  fi
}

# memory <which>: a fresh server, filled with JOBS delayed jobs; sets
# R[<which>_{idle_rss_kb,rss_kb,hwm_kb,fill_*}]. delayq keeps running
# (for the restart part) unless ONLY=memory.
memory() {
  local which=$1 dir=$WORK/data.$1
  rm -rf "$dir"
  mkdir -p "$dir"
  SERVER_PORT=$(free_port)
  exec_server "$which" "$dir"
  wait_accepting "$which" 30 || return 1
  sleep 0.2
  R[${which}_idle_rss_kb]=$(status_kb "$SERVER_PID" VmRSS)
  fill "${which}_fill" "$JOBS" "$DELAY_S" || { stop_server 5; return 1; }
  R[${which}_rss_kb]=$(status_kb "$SERVER_PID" VmRSS)
  R[${which}_hwm_kb]=$(status_kb "$SERVER_PID" VmHWM)
  say "$which: RSS idle $(mb "${R[${which}_idle_rss_kb]}") MB," \
    "after $JOBS delayed puts $(mb "${R[${which}_rss_kb]}") MB (peak $(mb "${R[${which}_hwm_kb]}") MB)"
  check_counts "$which" "$JOBS" 0
  [[ $which == delayq && $ONLY != memory ]] && return 0
  stop_server 5
}

# restart <tag> <data dir>: exec delayqd on the data directory, poll until
# a reserve answers RESERVED; sets R[restart_<tag>_{seconds,listen_seconds,rss_kb}].
restart() {
  local tag=$1 dir=$2 t0 rc listen=""
  SERVER_PORT=$(free_port)
  say "restart after $tag: exec delayqd on the same data directory..."
  t0=$(now)
  exec_server delayq "$dir"
  for (( ; ; )); do
    rc=0
    probe || rc=$?
    if ((rc == 0)); then break; fi
    if ((rc == 2)) && [[ -z $listen ]]; then listen=$(since "$t0"); fi
    server_alive "delayqd (restart after $tag)" "$WORK/delayq.log" || return 1
    if past "$t0" "$TIMEOUT"; then
      say "restart after $tag: no RESERVED within $TIMEOUT s"
      stop_server 1
      return 1
    fi
    sleep 0.01
  done
  R[restart_${tag}_seconds]=$(since "$t0")
  # Accepting and RESERVED in the same probe: the port opened in between.
  R[restart_${tag}_listen_seconds]=${listen:-${R[restart_${tag}_seconds]}}
  R[restart_${tag}_rss_kb]=$(status_kb "$SERVER_PID" VmRSS)
  say "restart after $tag: RESERVED after ${R[restart_${tag}_seconds]} s" \
    "(accepting after ${R[restart_${tag}_listen_seconds]} s), RSS $(mb "${R[restart_${tag}_rss_kb]}") MB;" \
    "delayqd: $(grep -o 'event=recovery_done.*' "$WORK/delayq.log" | tail -1)"
  check_counts "restart after $tag" "$JOBS" "$READY"
}

echo "horizon_bench: $(nproc) cpus, load average $(cut -d' ' -f1-3 /proc/loadavg)," \
  "$JOBS delayed jobs (${DELAY_S} s), $READY ready, ${BODY_SIZE}-byte bodies;" \
  "data under $WORK ($(df -T "$WORK" | awk 'NR == 2 { print $2 }'))" >&2

if [[ $ONLY != restart ]]; then
  memory beanstalkd || FAILED=1
fi
if memory delayq && [[ $ONLY != memory ]]; then
  dir=$WORK/data.delayq
  if fill delayq_ready_fill "$READY" 0; then
    R[delayq_rss_with_ready_kb]=$(status_kb "$SERVER_PID" VmRSS)
    say "delayq: RSS with $READY ready jobs on top $(mb "${R[delayq_rss_with_ready_kb]}") MB"
    check_counts delayq "$JOBS" "$READY"
    R[delayq_data_dir_mb]=$(du -sm "$dir" | cut -f1)
    say "delayq: data directory ${R[delayq_data_dir_mb]} MB"
    # 1. kill -9, restart.
    kill -9 "$SERVER_PID"
    wait "$SERVER_PID" 2>/dev/null || true
    SERVER_PID=""
    if restart kill9 "$dir"; then
      # 2. graceful stop (timed), restart.
      t0=$(now)
      kill "$SERVER_PID"
      for (( ; ; )); do
        kill -0 "$SERVER_PID" 2>/dev/null || break
        if awk -v s="$(since "$t0")" -v l="$TIMEOUT" 'BEGIN { exit !(s > l) }'; then
          say "delayqd did not stop within $TIMEOUT s of SIGTERM"
          FAILED=1
          break
        fi
        sleep 0.01
      done
      R[stop_sigterm_seconds]=$(since "$t0")
      rc=0
      wait "$SERVER_PID" 2>/dev/null || rc=$?
      SERVER_PID=""
      say "SIGTERM: delayqd stopped after ${R[stop_sigterm_seconds]} s (exit status $rc)"
      ((rc == 0)) || FAILED=1
      restart sigterm "$dir" || FAILED=1
    else
      FAILED=1
    fi
  else
    FAILED=1
  fi
  stop_server 30
else
  [[ $ONLY == memory ]] || FAILED=1
fi

# ---------------------------------------------------------------------------
# Report
# ---------------------------------------------------------------------------
get() { echo "${R[$1]:-n/a}"; }
mb_of() { if [[ -n ${R[$1]:-} ]]; then mb "${R[$1]}"; else echo n/a; fi; }
per_job() {  # (RSS after - idle RSS) / jobs, in bytes
  if [[ -n ${R[${1}_rss_kb]:-} && -n ${R[${1}_idle_rss_kb]:-} ]]; then
    awk -v a="${R[${1}_rss_kb]}" -v b="${R[${1}_idle_rss_kb]}" -v n="$JOBS" \
      'BEGIN { printf "%.1f\n", (a - b) * 1024 / n }'
  else
    echo n/a
  fi
}

echo "jobs_delayed: $JOBS"
echo "jobs_ready: $READY"
echo "delay_s: $DELAY_S"
echo "body_size: $BODY_SIZE"
for s in beanstalkd delayq; do
  echo "${s}_fill_jobs_per_s: $(get "${s}_fill_jobs_per_s")"
  echo "${s}_fill_seconds: $(get "${s}_fill_seconds")"
  echo "${s}_idle_rss_mb: $(mb_of "${s}_idle_rss_kb")"
  echo "${s}_hwm_mb: $(mb_of "${s}_hwm_kb")"
  echo "${s}_bytes_per_job: $(per_job "$s")"
  [[ $s == beanstalkd ]] && echo "beanstalkd_rss_mb: $(mb_of beanstalkd_rss_kb)"
done
b=$(per_job beanstalkd)
d=$(per_job delayq)
echo "delayq_vs_beanstalkd_bytes_per_job: $(awk -v a="$d" -v b="$b" 'BEGIN {
  if (a == "n/a" || b == "n/a" || b + 0 <= 0) print "n/a"; else printf "%.2f\n", a / b }')"
echo "delayq_ready_fill_jobs_per_s: $(get delayq_ready_fill_jobs_per_s)"
echo "delayq_ready_fill_seconds: $(get delayq_ready_fill_seconds)"
echo "delayq_rss_with_ready_mb: $(mb_of delayq_rss_with_ready_kb)"
echo "delayq_data_dir_mb: $(get delayq_data_dir_mb)"
for tag in kill9 sigterm; do
  [[ $tag == sigterm ]] && echo "delayq_stop_sigterm_seconds: $(get stop_sigterm_seconds)"
  echo "delayq_restart_${tag}_listen_seconds: $(get "restart_${tag}_listen_seconds")"
  echo "delayq_restart_${tag}_rss_mb: $(mb_of "restart_${tag}_rss_kb")"
  echo "delayq_restart_${tag}_seconds: $(get "restart_${tag}_seconds")"
done
echo "delayq_rss_mb: $(mb_of delayq_rss_kb)"

if ((FAILED)); then
  say "some steps failed (see above); their figures are missing"
  exit 1
fi
