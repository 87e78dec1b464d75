#!/usr/bin/env bash
# put_budget.sh: what one put costs each server in CPU, measured with the
# server alone on one core and the plain client (build/plain_loadgen) alone
# on the other. While the client's core is not full (its CPU below about
# 95%), the server's is, and the rate is the server's own: 1 s over its CPU
# time per put; a server faster than the client (the ceiling, delayqd in
# memory) shows the client's rate, and its CPU per put still tells its
# cost. The CPU time of each of the server's threads comes from the
# kernel's accounting (/proc/PID/task/TID/schedstat) over a window in the
# middle of the run, so that what a durable put costs can be told apart:
# the loop thread, the store's writer, RocksDB's flushes. This machine's
# rounds vary by a tenth or more: compare within a round, and medians.
#
#   bash bench/put_budget.sh [BUILD_DIR]      (default: build)
#
# Servers, in alternating order each round: build/ceiling_server (the
# least work a server can do for a put: bench/ceiling_server.cc), Debian's
# beanstalkd (1.12 here) with a binlog (-b DIR), delayqd in memory, and delayqd
# with its store under `everysec` (the default). Puts of 64 bytes at 50
# connections, one in flight each (the `everysec` puts target of
# docs/benchmarks.md).
#
# Environment: BUDGET_ROUNDS (2), BUDGET_SECONDS (5), BUDGET_CONNECTIONS
# (50), BEANSTALKD (beanstalkd on PATH). Needs taskset and two CPUs that
# the process may use (the first two of its affinity); without them it
# says why and prints its headline as n/a (so `make bench` goes on).
#
# Output: `name: value` lines on stdout, per server and round
# (budget_<server>_r<N>_jobs_per_s, budget_<server>_r<N>_us_per_put and
# budget_<server>_r<N>_<thread>_us_per_put for each thread of 0.01 us or
# more), the same time split into user space and the kernel
# (budget_<server>_r<N>_user_us_per_put, ..._kernel_us_per_put), then each
# one's median over the rounds (the same names without _r<N>, ending in
# _median), budget_durable_over_memory_user_us_per_put (the user-space
# part of the headline), and last the headline
# budget_durable_over_memory_us_per_put: what a durable put costs the
# server beyond one in memory (the medians' difference). Progress on
# stderr.
set -euo pipefail

BUILD_DIR=${1:-build}
ROUNDS=${BUDGET_ROUNDS:-2}
SECONDS_PER_RUN=${BUDGET_SECONDS:-5}
CONNECTIONS=${BUDGET_CONNECTIONS:-50}
BEANSTALKD=${BEANSTALKD:-$(command -v beanstalkd || true)}
DELAYQD=$BUILD_DIR/delayqd
CEILING=$BUILD_DIR/ceiling_server
LOADGEN=$BUILD_DIR/plain_loadgen

die() {
  echo "put_budget: $*" >&2
  exit 1
}
# shellcheck source=bench/lib.sh
source "$(dirname "$0")/lib.sh"

for f in "$DELAYQD" "$CEILING" "$LOADGEN"; do [[ -x $f ]] || die "$f not found (make build)"; done
[[ -n $BEANSTALKD ]] || die "beanstalkd not found (apt-get install beanstalkd)"
((SECONDS_PER_RUN >= 3)) || die "BUDGET_SECONDS must be at least 3"
skip() {
  echo "put_budget: skipped: $*" >&2
  echo "budget_durable_over_memory_user_us_per_put: n/a"
  echo "budget_durable_over_memory_us_per_put: n/a"
  exit 0
}
command -v taskset >/dev/null || skip "taskset not found (util-linux)"
# The first two CPUs this process may run on: the server's and the client's.
mapfile -t CPUS < <(taskset -pc $$ | sed 's/.*: //' | tr ',' '\n' |
  awk -F- '{ for (c = $1; c <= ($2 == "" ? $1 : $2); c++) print c }' | head -2)
((${#CPUS[@]} >= 2)) || skip "needs two CPUs (one for the server, one for the client)"
SERVER_CPU=${CPUS[0]}
CLIENT_CPU=${CPUS[1]}

WORK=$(mktemp -d /tmp/put_budget.XXXXXX)
SERVER_PID=""
CLIENT_PID=""
cleanup() {
  [[ -n $CLIENT_PID ]] && kill "$CLIENT_PID" 2>/dev/null
  stop_server
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# threads_cpu PID: "tid name cpu_ns user_ticks kernel_ticks" for each
# thread of PID (schedstat's run time; stat's utime and stime, fields 14
# and 15, counted after the name's closing parenthesis).
# A thread that ends between the reads is left out; a space in a name
# becomes _ (the fields stay in their places).
threads_cpu() {
  local t stat name ns
  for t in /proc/"$1"/task/*; do
    stat=$(cat "$t/stat" 2>/dev/null) || continue
    name=$(cat "$t/comm" 2>/dev/null) || continue
    ns=$(cut -d' ' -f1 "$t/schedstat" 2>/dev/null) || continue
    [[ -n $ns ]] || continue
    stat=${stat##*) }
    echo "${t##*/} ${name// /_} $ns $(awk '{print $12, $13}' <<<"$stat")"
  done
}
TICKS_PER_S=$(getconf CLK_TCK)

# run_one <server> <round>: starts it on SERVER_CPU, the client on CLIENT_CPU.
run_one() {
  local which=$1 round=$2 port dir cmd
  dir=$WORK/data.$which
  rm -rf "$dir"
  mkdir -p "$dir"
  case $which in
    ceiling) cmd=("$CEILING" --host 127.0.0.1 --port @PORT@) ;;
    beanstalkd) cmd=("$BEANSTALKD" -l 127.0.0.1 -p @PORT@ -b "$dir") ;;
    delayq_*)
      local store=(--data-dir "$dir")
      [[ $which == delayq_memory ]] && store=(--in-memory)
      cmd=("$DELAYQD" -l 127.0.0.1 -p @PORT@ --no-http --log-level warn "${store[@]}")
      ;;
  esac
  start_on_free_port "$WORK/$which.log" "put_budget: $which" taskset -c "$SERVER_CPU" "${cmd[@]}" ||
    die "$which did not start"
  port=$FREE_PORT
  taskset -c "$CLIENT_CPU" "$LOADGEN" --port "$port" --tube bench --mode put \
    --connections "$CONNECTIONS" --seconds "$SECONDS_PER_RUN" --warmup 0.5 >"$WORK/client.out" 2>&1 &
  CLIENT_PID=$!
  # The window: from 1 s into the measured part (after the client's 0.5 s
  # of warm-up) to 0.5 s before its end.
  local window
  window=$(awk -v s="$SECONDS_PER_RUN" 'BEGIN { printf "%.1f", s - 1.5 }')
  sleep 1.5
  threads_cpu "$SERVER_PID" >"$WORK/cpu0"
  sleep "$window"
  threads_cpu "$SERVER_PID" >"$WORK/cpu1"
  wait "$CLIENT_PID" || die "the client failed against $which: $(tail -3 "$WORK/client.out")"
  CLIENT_PID=""
  stop_server 1
  local rate client_cpu
  rate=$(awk '/^jobs_per_s:/ {print $2}' "$WORK/client.out")
  client_cpu=$(awk '/^client_cpu_percent:/ {print $2}' "$WORK/client.out")
  [[ -n $rate && $rate -gt 0 ]] || die "no rate from the client against $which"
  local key=budget_${which}_r${round}
  echo "${key}_jobs_per_s: $rate" | tee -a "$WORK/all"
  # Per thread name (several threads may share one), microseconds a put;
  # a thread started within the window counts from 0.
  # The same time split into user space and the kernel, all threads
  # together: stat's utime and stime, in clock ticks of 10 ms (about
  # 0.3% of a busy core over a 3.5 s window) and sampled at each tick, so
  # the split is rougher than the total.
  awk -v r="$rate" -v w="$window" -v k="$key" -v hz="$TICKS_PER_S" '
    FNR == NR { before[$1] = $3; ub[$1] = $4; kb[$1] = $5; next }
    { ns[$2] += $3 - ($1 in before ? before[$1] : 0)
      user += $4 - ($1 in ub ? ub[$1] : 0); kernel += $5 - ($1 in kb ? kb[$1] : 0) }
    END {
      for (n in ns) { u = ns[n] / 1e3 / (w * r); t += u
        if (u >= 0.01) { name = n; gsub(/[^A-Za-z0-9]/, "_", name); printf "%s_%s_us_per_put: %.2f\n", k, name, u } }
      printf "%s_us_per_put: %.2f\n", k, t
      printf "%s_user_us_per_put: %.2f\n", k, user * 1e6 / hz / (w * r)
      printf "%s_kernel_us_per_put: %.2f\n", k, kernel * 1e6 / hz / (w * r)
    }' "$WORK/cpu0" "$WORK/cpu1" | sort | tee "$WORK/lines" | tee -a "$WORK/all"
  printf 'put_budget: round %s %-16s %8s puts/s  %s us a put on its core (%s; user %s, kernel %s)  client cpu %s%%\n' \
    "$round" "$which" "$rate" "$(awk -F': ' '/_r[0-9]+_us_per_put:/ {print $2}' "$WORK/lines")" \
    "$(grep -Ev '_r[0-9]+_(user_|kernel_)?us_per_put:' "$WORK/lines" | sed "s/^${key}_//; s/_us_per_put//" |
      tr '\n' ' ' | sed 's/ $//')" \
    "$(awk -F': ' '/_r[0-9]+_user_us_per_put:/ {print $2}' "$WORK/lines")" \
    "$(awk -F': ' '/_r[0-9]+_kernel_us_per_put:/ {print $2}' "$WORK/lines")" \
    "$client_cpu" >&2
}

servers=(ceiling beanstalkd delayq_memory delayq_everysec)
: >"$WORK/all"
for ((r = 1; r <= ROUNDS; r++)); do
  if ((r % 2)); then
    for ((i = 0; i < ${#servers[@]}; i++)); do run_one "${servers[i]}" "$r"; done
  else  # the other way round
    for ((i = ${#servers[@]} - 1; i >= 0; i--)); do run_one "${servers[i]}" "$r"; done
  fi
done

# Medians over the rounds, figure by figure.
declare -A values=()
while IFS=': ' read -r name value; do
  name=$(sed -E 's/_r[0-9]+_/_/' <<<"$name")
  values[$name]="${values[$name]:-} $value"
done <"$WORK/all"
for name in $(printf '%s\n' "${!values[@]}" | sort); do
  echo "${name}_median: $(median "${values[$name]}")"
done
# over_memory FIGURE: budget_durable_over_memory_FIGURE, the difference of
# the two delayqd medians of budget_delayq_*_FIGURE.
over_memory() {
  local durable memory
  durable=$(median "${values[budget_delayq_everysec_$1]}")
  memory=$(median "${values[budget_delayq_memory_$1]}")
  echo "budget_durable_over_memory_$1: $(awk -v d="$durable" -v m="$memory" 'BEGIN { printf "%.2f", d - m }')"
}
over_memory user_us_per_put
over_memory us_per_put
