#!/usr/bin/env bash
# server_bench.sh: delayqd against Debian's beanstalkd, in one run, with the
# same load generator (bench/loadgen.cc) speaking the beanstalkd protocol.
#
#   bash bench/server_bench.sh [BUILD_DIR]        (default: build)
#
# Every measurement starts a fresh server on a free loopback port (so no state
# is carried from one mode to the next: put-only leaves its jobs behind),
# waits until it accepts, runs build/loadgen against it, and stops it. The two
# servers alternate (round 1: beanstalkd first, round 2: delayqd first, ...)
# so that a change in background load hits both; each figure is the best of
# BENCH_ROUNDS rounds (highest jobs/s; for lateness, lowest p99). Each ratio
# against beanstalkd also comes as <ratio>_median_of_rounds: the median over
# the rounds of that round's own ratio.
#
# Measurements (loadgen --mode ...):
#   lifecycle c=1, 10, 50   put -> reserve -> delete per job, one request in flight;
#                           also against build/ceiling_server (bench/ceiling_server.cc),
#                           which answers with the least work a server can do: its
#                           jobs/s is what the machine allows any single-threaded
#                           epoll server, the load generator sharing its cores
#   lifecycle_busy c=1, 10  the same with loadgen --busy-wait: the client polls
#                           instead of sleeping, so a reply does not cost the
#                           server a wake-up of the client (as with a client on
#                           another machine); at c=50 the client never sleeps
#                           anyway. All three servers.
#   lifecycle_no_poll c=1   delayqd --busy-poll-us 0: without the loop's adaptive
#                           polling (ratio against beanstalkd's c=1)
#   trickle                 what the polling costs where it cannot pay: 1 producer
#                           puts 1000 jobs/s (ms delays up to 20 ms), 1 worker
#                           reserves and deletes them; delayqd's CPU per job, by
#                           default and with --busy-poll-us 0, alternating
#   put c=50                put-only (and the ceiling)
#   pipeline c=4 depth=64   pipelined puts
#   lateness                2 producers put BENCH_LATENESS_RATE jobs/s for
#                           BENCH_LATENESS_SECONDS with delays spread over
#                           1..2000 ms (delayq: put-ex, ms delays) or 1..2 s
#                           (classic put, whole seconds; both servers);
#                           8 workers block in reserve and delete each job;
#                           lateness = RESERVED arrival - due time
#
# Durable (each server keeps its jobs on disk, fresh directory per run):
#   durable_always_{lifecycle_c1,lifecycle_c50,put_c50,pipeline_c4_d64}
#                                       delayqd --fsync always vs beanstalkd -b DIR -f 0
#   durable_everysec_{...the same}      delayqd --fsync everysec (the default)
#                                       vs beanstalkd -b DIR (its default fsync)
#   delayq_durable_always_*_syncs_per_s delayqd's syncs of its log a second under
#                                       always (its /metrics), against
#   fdatasync_per_s_{preallocated,appending}  what the disk allows: 64-byte
#                                       writes each followed by its sync (dd
#                                       oflag=dsync), into a file written
#                                       beforehand, and at the end of one
# BENCH_ONLY=memory or BENCH_ONLY=durable runs one of the two parts;
# BENCH_DURABLE_TAGS (a list of the four above, without durable_<policy>_)
# a share of the durable one.
#
# Two clients: every lifecycle, put, pipeline and durable figure is also
# measured with build/plain_loadgen (bench/plain_loadgen.c), a plain C client
# that any user might write: one epoll loop that sleeps in epoll_wait and
# never polls, 64-byte bodies. Its figures and ratios carry the prefix
# `plain_` (plain_delayq_lifecycle_c50_jobs_per_s, plain_lifecycle_vs_
# beanstalkd_c50, ...); the two clients run back to back against each
# server in every round. BENCH_PLAIN=0 leaves them out. On one machine the
# client shares the cores: plain_<tag>_client_bound_vs_beanstalkd is the
# most any server could show against beanstalkd with this client here (the
# client's CPU per job in delayqd's best round, a whole core of it, against
# beanstalkd's rate); a ratio near it is the client's ceiling, not delayqd's.
# The plain client also runs against the ceiling server, in the memory
# part and in the durable part's `everysec` workloads at 50 connections
# (where it keeps nothing on disk: what a server doing no work reaches with
# this client on this machine, beside the client's own bound):
# plain_ceiling_vs_beanstalkd_<tag> and plain_delayq_vs_ceiling_<tag>.
#
# Output: `name: value` lines on stdout, the headline
# `lifecycle_vs_beanstalkd_c50` last; progress (with server and client CPU use
# of each run) on stderr. Environment knobs: BENCH_SECONDS (measured seconds
# per round, default 2), BENCH_WARMUP (0.5), BENCH_ROUNDS (3),
# BENCH_LATENESS_SECONDS (3), BENCH_LATENESS_RATE (5000), BEANSTALKD
# (/usr/bin/beanstalkd), BENCH_DELAYQD_ARGS (extra delayqd flags).
set -euo pipefail

BUILD_DIR=${1:-build}
LOADGEN=$BUILD_DIR/loadgen
PLAIN_LOADGEN=$BUILD_DIR/plain_loadgen
PLAIN=${BENCH_PLAIN:-1}
CLIENT=loadgen  # the client run_one runs: loadgen or plain
CEILING=$BUILD_DIR/ceiling_server
DELAYQD=$BUILD_DIR/delayqd
BEANSTALKD=${BEANSTALKD:-/usr/bin/beanstalkd}
SECS=${BENCH_SECONDS:-2}
WARMUP=${BENCH_WARMUP:-0.5}
ROUNDS=${BENCH_ROUNDS:-3}
LAT_SECS=${BENCH_LATENESS_SECONDS:-3}
LAT_RATE=${BENCH_LATENESS_RATE:-5000}
DELAYQD_ARGS=${BENCH_DELAYQD_ARGS:-}
ONLY=${BENCH_ONLY:-}
# Server flags of the part being measured; @DIR@ becomes a fresh directory.
BEAN_SERVER_ARGS=""
DQ_SERVER_ARGS="--in-memory"

die() { echo "server_bench: $*" >&2; exit 1; }
[[ -x $LOADGEN ]] || die "$LOADGEN not found (build the loadgen target: make build)"
[[ -x $DELAYQD ]] || die "$DELAYQD not found (make build)"
[[ $PLAIN == 0 || -x $PLAIN_LOADGEN ]] || die "$PLAIN_LOADGEN not found (make build; or BENCH_PLAIN=0)"
[[ -x $CEILING ]] || die "$CEILING not found (build the ceiling_server target: make build)"
[[ -x $BEANSTALKD ]] ||
  die "$BEANSTALKD not found (Debian: apt-get install beanstalkd; or set BEANSTALKD=)"

WORK=$(mktemp -d "${TMPDIR:-/tmp}/server_bench.XXXXXX")
SERVER_PID=""
SERVER_PORT=""
SERVER_HTTP_PORT=""
CLK_TCK=$(getconf CLK_TCK)

# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cleanup() { stop_server 1; rm -rf "$WORK"; }
trap cleanup EXIT
trap 'exit 130' INT TERM


# start_server beanstalkd|delayq|ceiling: sets SERVER_PID and SERVER_PORT.
start_server() {
  local which=$1 log=$WORK/$1.log
  local dir=$WORK/data.$which
  rm -rf "$dir"
  mkdir -p "$dir"
  local bargs=${BEAN_SERVER_ARGS//@DIR@/$dir} dargs=${DQ_SERVER_ARGS//@DIR@/$dir}
  local cmd
  # shellcheck disable=SC2206  # the *ARGS are lists of flags (the whole if)
  if [[ $which == beanstalkd ]]; then
    cmd=("$BEANSTALKD" -l 127.0.0.1 -p @PORT@ $bargs)
  elif [[ $which == ceiling ]]; then
    cmd=("$CEILING" --host 127.0.0.1 --port @PORT@)
  else
    local http=(--no-http)
    [[ $dargs == *"--fsync always"* ]] && http=(--http-port @PORT2@)
    cmd=("$DELAYQD" -l 127.0.0.1 -p @PORT@ "${http[@]}" --log-level warn $dargs $DELAYQD_ARGS)
  fi
  if start_on_free_port "$log" "server_bench: $which" "${cmd[@]}"; then
    SERVER_PORT=$FREE_PORT
    SERVER_HTTP_PORT=$FREE_PORT2
    return 0
  fi
  stop_server 1
  return 1
}

cpu_ticks() {  # utime + stime of a process, in clock ticks
  local stat
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || { echo 0; return; }
  stat=${stat##*) }  # the fields after "(comm) "
  # shellcheck disable=SC2086
  set -- $stat
  echo $((${12} + ${13}))
}

runq_ns() {  # time the process's main thread waited for a CPU while runnable
  local a b c
  read -r a b c <"/proc/$1/schedstat" 2>/dev/null || { echo 0; return; }
  echo "$b"
}
MAX_RUNQ=0  # worst share of a run's wall time the server spent waiting for a CPU

declare -A R=()  # R[<server>_<tag>_<figure>] = value (best round)
FAILED=0

value_of() {  # value_of <name> <loadgen output>
  awk -F': ' -v k="$1" '$1 == k { print $2; exit }' <<<"$2"
}

# run_one <server> <tag> <loadgen args...>: one round; keeps the best.
run_one() {
  local server=$1 tag=$2
  shift 2
  if ! start_server "$server"; then
    FAILED=1
    return 0
  fi
  local t0 t1 w0 w1 out rc=0
  local q0 q1
  t0=$(cpu_ticks "$SERVER_PID")
  q0=$(runq_ns "$SERVER_PID")
  w0=$(date +%s%N)
  local client=$LOADGEN
  [[ $CLIENT == plain ]] && client=$PLAIN_LOADGEN
  out=$("$client" --port "$SERVER_PORT" --tube bench "$@" 2>"$WORK/loadgen.err") || rc=$?
  w1=$(date +%s%N)
  t1=$(cpu_ticks "$SERVER_PID")
  q1=$(runq_ns "$SERVER_PID")
  local alive=yes
  kill -0 "$SERVER_PID" 2>/dev/null || alive=no
  local syncs=""
  if [[ -n $SERVER_HTTP_PORT && $alive == yes ]]; then
    # Syncs of the log since the start (a few of them at the start itself).
    syncs=$(curl -s "http://127.0.0.1:$SERVER_HTTP_PORT/metrics" |
      awk '$1 == "delayq_store_sync_duration_seconds_count" { print $2 }')
    syncs=$(awk -v n="${syncs:-0}" -v ns=$((w1 - w0)) 'BEGIN { printf "%.0f", n / (ns / 1e9) }')
  fi
  SERVER_HTTP_PORT=""
  stop_server 1
  local server_cpu runq
  server_cpu=$(awk -v t=$((t1 - t0)) -v hz="$CLK_TCK" -v ns=$((w1 - w0)) \
    'BEGIN { printf "%.0f", 100 * (t / hz) / (ns / 1e9) }')
  runq=$(awk -v q=$((q1 - q0)) -v ns=$((w1 - w0)) 'BEGIN { printf "%.0f", 100 * q / ns }')
  ((runq > MAX_RUNQ)) && MAX_RUNQ=$runq
  local cpus="server cpu ${server_cpu}%, waiting for a cpu ${runq}%"
  if [[ $rc -ne 0 || $alive == no ]]; then
    echo "server_bench: $server $tag failed (loadgen exit $rc, server alive: $alive):" >&2
    cat "$WORK/loadgen.err" >&2
    [[ $alive == no ]] && tail -5 "$WORK/$server.log" >&2
    FAILED=1
    return 0
  fi
  local key=${server}_${tag}
  [[ $CLIENT == plain ]] && key=plain_${key}
  if [[ $tag == lateness* || $tag == trickle* ]]; then
    local p50 p99
    p50=$(value_of lateness_p50_ms "$out")
    p99=$(value_of lateness_p99_ms "$out")
    local jobs cpu_us
    jobs=$(value_of jobs_received "$out")
    # The server's CPU per job received, every round (the trickle's figure).
    cpu_us=$(awk -v t=$((t1 - t0)) -v hz="$CLK_TCK" -v n="${jobs:-0}" \
      'BEGIN { if (n > 0) printf "%.1f", 1e6 * t / hz / n; else print "n/a" }')
    [[ $cpu_us != n/a ]] && R[${key}_cpu_us]="${R[${key}_cpu_us]:-} $cpu_us"
    printf 'server_bench: %-10s %-16s lateness p50 %7s ms  p99 %7s ms  (%s/%s jobs; %s, %s us/job; loadgen cpu %s%%)\n' \
      "$server" "$tag" "$p50" "$p99" "$jobs" \
      "$(value_of jobs_put "$out")" "$cpus" "$cpu_us" "$(value_of client_cpu_percent "$out")" >&2
    if [[ -z ${R[${key}_p99_ms]:-} ]] ||
      awk -v a="$p99" -v b="${R[${key}_p99_ms]}" 'BEGIN { exit !(a < b) }'; then
      R[${key}_p50_ms]=$p50
      R[${key}_p99_ms]=$p99
    fi
  else
    local jps p50 p99 label=$tag
    [[ $CLIENT == plain ]] && label="plain $tag"
    jps=$(value_of jobs_per_s "$out")
    p50=$(value_of latency_p50_us "$out")
    p99=$(value_of latency_p99_us "$out")
    printf 'server_bench: %-10s %-22s %8s jobs/s  p50 %7s us  p99 %7s us  (%s; client cpu %s%%)%s\n' \
      "$server" "$label" "$jps" "$p50" "$p99" "$cpus" "$(value_of client_cpu_percent "$out")" \
      "${syncs:+ $syncs syncs/s}" >&2
    # Every round's rate, in order: round r of the two servers ran in the
    # same minute (pair_median).
    R[${key}_rounds]="${R[${key}_rounds]:-} $jps"
    if [[ -z ${R[${key}_jobs_per_s]:-} ]] || ((jps > R[${key}_jobs_per_s])); then
      R[${key}_jobs_per_s]=$jps
      # The rate at which the client would fill its core, at the CPU per
      # job it spent in this round: no server can be measured faster with it.
      R[${key}_client_bound_jobs_per_s]=$(awk -v j="$jps" \
        -v c="$(value_of client_cpu_percent "$out")" 'BEGIN { if (c > 0) printf "%.0f", j * 100 / c; else print "n/a" }')
      [[ -n $syncs ]] && R[${key}_syncs_per_s]=$syncs
      R[${key}_latency_p50_us]=$p50
      R[${key}_latency_p99_us]=$p99
    fi
  fi
}

# measure <tag> <beanstalkd args|-> <delayq args|-> [<ceiling args>|-] :
# ROUNDS alternating rounds. "-" skips that server (the ceiling by default).
measure() {
  local tag=$1 bargs=$2 dargs=$3 cargs=${4:--} r
  for ((r = 1; r <= ROUNDS; r++)); do
    local order=(beanstalkd delayq ceiling)
    ((r % 2 == 0)) && order=(ceiling delayq beanstalkd)
    for s in "${order[@]}"; do
      local a=$bargs
      [[ $s == delayq ]] && a=$dargs
      [[ $s == ceiling ]] && a=$cargs
      [[ $a == - ]] && continue
      # shellcheck disable=SC2086  # $a is a list of loadgen flags
      CLIENT=loadgen run_one "$s" "$tag" $a
      # The plain client, right after, where it has the mode (not the
      # lateness and busy-wait ones) and against the servers compared.
      if [[ $PLAIN != 0 && $tag =~ ^(lifecycle_c|put_|pipeline_|durable_) ]]; then
        # shellcheck disable=SC2086
        CLIENT=plain run_one "$s" "$tag" $a
      fi
    done
  done
}

echo "server_bench: $(nproc) cpus, load average $(cut -d' ' -f1-3 /proc/loadavg)," \
  "$ROUNDS rounds of ${SECS}s (+${WARMUP}s warm-up) per figure;" \
  "beanstalkd: $("$BEANSTALKD" -v 2>&1 | head -1)" >&2

T="--seconds $SECS --warmup $WARMUP"
if [[ $ONLY != durable ]]; then
  for c in 1 10 50; do
    A="--mode lifecycle --connections $c $T"
    measure "lifecycle_c$c" "$A" "$A" "$A"
  done
  for c in 1 10; do
    A="--mode lifecycle --connections $c --busy-wait $T"
    measure "lifecycle_busy_c$c" "$A" "$A" "$A"
  done
  DQ_SERVER_ARGS="--in-memory --busy-poll-us 0"
  measure lifecycle_no_poll_c1 - "--mode lifecycle --connections 1 $T"
  TR="--mode lateness --connections 1 --producers 1 --rate 1000 --seconds $LAT_SECS"
  TR="$TR --max-delay-ms 20 --protocol-ms"
  for ((r = 1; r <= ROUNDS; r++)); do
    for v in "" _no_poll; do
      [[ $v == _no_poll ]] && DQ_SERVER_ARGS="--in-memory --busy-poll-us 0"
      # shellcheck disable=SC2086  # $TR is a list of loadgen flags
      run_one delayq "trickle$v" $TR
      DQ_SERVER_ARGS="--in-memory"
    done
  done
  A="--mode put --connections 50 $T"
  measure put_c50 "$A" "$A" "$A"
  measure pipeline_c4_d64 "--mode pipeline --connections 4 --pipeline-depth 64 $T" \
    "--mode pipeline --connections 4 --pipeline-depth 64 $T"
  L="--mode lateness --connections 8 --producers 2 --rate $LAT_RATE --seconds $LAT_SECS --max-delay-ms 2000"
  measure lateness_s "$L" "$L"
  measure lateness_ms - "$L --protocol-ms"
fi
# dsync_rate [append]: 64-byte writes a second, each synced (O_DSYNC), into
# a file of 4 MB written beforehand (its size and blocks are there: a sync
# writes the data alone), or, with `append`, at the end of a growing one.
dsync_rate() {
  local f=$WORK/dsync.bin secs
  rm -f "$f"
  if [[ ${1:-} == append ]]; then
    : >"$f"
    secs=$(dd if=/dev/zero of="$f" bs=64 count=500 oflag=dsync,append conv=notrunc 2>&1 |
      sed -n 's/.*copied, \([0-9.]*\) s.*/\1/p')
  else
    dd if=/dev/zero of="$f" bs=1M count=4 conv=fsync status=none
    secs=$(dd if=/dev/zero of="$f" bs=64 count=500 oflag=dsync conv=notrunc 2>&1 |
      sed -n 's/.*copied, \([0-9.]*\) s.*/\1/p')
  fi
  rm -f "$f"
  awk -v s="${secs:-0}" 'BEGIN { if (s > 0) printf "%.0f", 500 / s; else print "n/a" }'
}
DURABLE_TAGS=${BENCH_DURABLE_TAGS:-lifecycle_c1 lifecycle_c50 put_c50 pipeline_c4_d64}
if [[ $ONLY != memory ]]; then
  R[fdatasync_per_s_preallocated]=$(dsync_rate)
  R[fdatasync_per_s_appending]=$(dsync_rate append)
  echo "server_bench: the disk: ${R[fdatasync_per_s_preallocated]} syncs/s into a written file," \
    "${R[fdatasync_per_s_appending]} at the end of a growing one" >&2
  for policy in always everysec; do
    if [[ $policy == always ]]; then
      BEAN_SERVER_ARGS="-b @DIR@ -f 0"
    else
      BEAN_SERVER_ARGS="-b @DIR@"
    fi
    DQ_SERVER_ARGS="-b @DIR@ --fsync $policy"
    for tag in $DURABLE_TAGS; do
      case $tag in
        lifecycle_c*) A="--mode lifecycle --connections ${tag#lifecycle_c}" ;;
        put_c50) A="--mode put --connections 50" ;;
        pipeline_c4_d64) A="--mode pipeline --connections 4 --pipeline-depth 64" ;;
      esac
      # The ceiling (nothing on disk) where the targets are nearest to it.
      ceiling_args=-
      [[ $policy == everysec && $tag == *_c50 ]] && ceiling_args="$A $T"
      measure "durable_${policy}_$tag" "$A $T" "$A $T" "$ceiling_args"
    done
  done
  BEAN_SERVER_ARGS=""
  DQ_SERVER_ARGS="--in-memory"
fi

# ---------------------------------------------------------------------------
# Report
# ---------------------------------------------------------------------------
get() { echo "${R[$1]:-n/a}"; }
ratio() {  # ratio <numerator key> <denominator key>
  local a b
  a=$(get "$1")
  b=$(get "$2")
  awk -v a="$a" -v b="$b" 'BEGIN {
    if (a == "n/a" || b == "n/a" || b + 0 <= 0) print "n/a"; else printf "%.2f\n", a / b }'
}
emit() { echo "$1: $(get "$1")"; }
# pair_median <numerator prefix> <denominator prefix>: the median over the
# rounds of round r's ratio (the two servers' rates of one round, measured
# minutes apart at most), beside the ratio of the best rounds: a lucky round
# of one server moves it less.
pair_median() {
  local a=${R[$1_rounds]:-} b=${R[$2_rounds]:-}
  awk -v a="$a" -v b="$b" 'BEGIN {
    n = split(a, x, " "); m = split(b, y, " ")
    if (n == 0 || n != m) { print "n/a"; exit }
    for (i = 1; i <= n; i++) { if (y[i] <= 0) { print "n/a"; exit } r[i] = x[i] / y[i] }
    for (i = 2; i <= n; i++) for (j = i; j > 1 && r[j - 1] > r[j]; j--) { t = r[j]; r[j] = r[j - 1]; r[j - 1] = t }
    printf "%.2f\n", n % 2 ? r[(n + 1) / 2] : (r[n / 2] + r[n / 2 + 1]) / 2 }'
}

echo "bench_rounds: $ROUNDS"
echo "bench_seconds_per_round: $SECS"
for tag in lifecycle_c1 lifecycle_c10 lifecycle_c50 lifecycle_busy_c1 lifecycle_busy_c10 \
  put_c50 pipeline_c4_d64; do
  for s in beanstalkd delayq; do
    emit "${s}_${tag}_jobs_per_s"
    emit "${s}_${tag}_latency_p50_us"
    emit "${s}_${tag}_latency_p99_us"
  done
  base=${tag%%_c*}
  suffix=${tag#"${base}"_}
  # The c50 lifecycle ratio is the headline: printed once, last.
  [[ $tag == lifecycle_c50 ]] ||
    echo "${base}_vs_beanstalkd_${suffix}: $(ratio "delayq_${tag}_jobs_per_s" "beanstalkd_${tag}_jobs_per_s")"
  echo "${base}_vs_beanstalkd_${suffix}_median_of_rounds: $(pair_median "delayq_${tag}" "beanstalkd_${tag}")"
done
# The ceiling: what a server doing nothing but the socket work gets here.
for tag in lifecycle_c1 lifecycle_c10 lifecycle_c50 lifecycle_busy_c1 lifecycle_busy_c10 put_c50; do
  emit "ceiling_${tag}_jobs_per_s"
  echo "ceiling_vs_beanstalkd_${tag}: $(ratio "ceiling_${tag}_jobs_per_s" "beanstalkd_${tag}_jobs_per_s")"
  echo "delayq_vs_ceiling_${tag}: $(ratio "delayq_${tag}_jobs_per_s" "ceiling_${tag}_jobs_per_s")"
done
emit delayq_lifecycle_no_poll_c1_jobs_per_s
echo "lifecycle_no_poll_vs_beanstalkd_c1: $(ratio delayq_lifecycle_no_poll_c1_jobs_per_s beanstalkd_lifecycle_c1_jobs_per_s)"
# The trickle: delayqd's CPU per job (mean of the rounds) with and without polling.
for k in delayq_trickle delayq_trickle_no_poll; do
  R[${k}_cpu_us_per_job]=$(awk '{ s = 0; for (i = 1; i <= NF; i++) s += $i;
    if (NF) printf "%.1f\n", s / NF; else print "n/a" }' <<<"${R[${k}_cpu_us]:-}")
  emit "${k}_cpu_us_per_job"
done
echo "trickle_cpu_poll_over_no_poll: $(ratio delayq_trickle_cpu_us_per_job delayq_trickle_no_poll_cpu_us_per_job)"
echo "lateness_rate_jobs_per_s: $LAT_RATE"
for k in beanstalkd_lateness_s delayq_lateness_s delayq_lateness_ms; do
  emit "${k}_p50_ms"
  emit "${k}_p99_ms"
done
# Target: delayq with ms delays no later at p99 than beanstalkd with s delays (<= 1).
echo "lateness_p99_delayq_ms_over_beanstalkd_s: $(ratio delayq_lateness_ms_p99_ms beanstalkd_lateness_s_p99_ms)"
echo "lateness_p99_delayq_s_over_beanstalkd_s: $(ratio delayq_lateness_s_p99_ms beanstalkd_lateness_s_p99_ms)"
# emit_both PREFIX TAG: both servers' jobs/s and p99 of TAG.
emit_both() {
  local s
  for s in beanstalkd delayq; do
    emit "$1${s}_$2_jobs_per_s"
    emit "$1${s}_$2_latency_p99_us"
  done
}
emit fdatasync_per_s_preallocated
emit fdatasync_per_s_appending
for policy in always everysec; do
  for t in $DURABLE_TAGS; do
    tag=durable_${policy}_$t
    emit_both "" "$tag"
    [[ $policy == always ]] && emit "delayq_${tag}_syncs_per_s"
    echo "${tag}_vs_beanstalkd: $(ratio "delayq_${tag}_jobs_per_s" "beanstalkd_${tag}_jobs_per_s")"
    echo "${tag}_vs_beanstalkd_median_of_rounds: $(pair_median "delayq_${tag}" "beanstalkd_${tag}")"
  done
done
# The plain client's figures (bench/plain_loadgen.c): the same servers, the
# same rounds.
if [[ $PLAIN != 0 ]]; then
  for tag in lifecycle_c1 lifecycle_c10 lifecycle_c50 put_c50 pipeline_c4_d64 \
    $(for p in always everysec; do for t in $DURABLE_TAGS; do echo "durable_${p}_$t"; done; done); do
    [[ -n ${R[plain_delayq_${tag}_jobs_per_s]:-} || -n ${R[plain_beanstalkd_${tag}_jobs_per_s]:-} ]] || continue
    emit_both plain_ "$tag"
    echo "plain_${tag}_vs_beanstalkd: $(ratio "plain_delayq_${tag}_jobs_per_s" "plain_beanstalkd_${tag}_jobs_per_s")"
    echo "plain_${tag}_vs_beanstalkd_median_of_rounds: $(pair_median "plain_delayq_${tag}" "plain_beanstalkd_${tag}")"
    # The most any server could show against beanstalkd with this client on
    # this machine (its own core's worth of its CPU per job, from delayqd's
    # best round): a target above it is the client's to miss, not the server's.
    emit "plain_delayq_${tag}_client_bound_jobs_per_s"
    echo "plain_${tag}_client_bound_vs_beanstalkd: $(ratio \
      "plain_delayq_${tag}_client_bound_jobs_per_s" "plain_beanstalkd_${tag}_jobs_per_s")"
    # A server doing nothing but the socket work, with this client.
    if [[ -n ${R[plain_ceiling_${tag}_jobs_per_s]:-} ]]; then
      emit "plain_ceiling_${tag}_jobs_per_s"
      echo "plain_ceiling_vs_beanstalkd_${tag}: $(ratio \
        "plain_ceiling_${tag}_jobs_per_s" "plain_beanstalkd_${tag}_jobs_per_s")"
      echo "plain_ceiling_vs_beanstalkd_${tag}_median_of_rounds: $(pair_median \
        "plain_ceiling_${tag}" "plain_beanstalkd_${tag}")"
      echo "plain_delayq_vs_ceiling_${tag}: $(ratio \
        "plain_delayq_${tag}_jobs_per_s" "plain_ceiling_${tag}_jobs_per_s")"
    fi
  done
fi
echo "lifecycle_vs_beanstalkd_c50: $(ratio delayq_lifecycle_c50_jobs_per_s beanstalkd_lifecycle_c50_jobs_per_s)"

if ((MAX_RUNQ >= 10)); then
  echo "server_bench: note: a server spent up to ${MAX_RUNQ}% of a run waiting for a CPU" \
    "(other processes were busy; load average now $(cut -d' ' -f1-3 /proc/loadavg)):" \
    "the figures are noisy" >&2
fi
if ((FAILED)); then
  echo "server_bench: some runs failed (see above); their figures are missing or from fewer rounds" >&2
  exit 1
fi
