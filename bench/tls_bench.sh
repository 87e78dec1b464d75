#!/usr/bin/env bash
# tls_bench.sh: the lifecycle (put -> reserve -> delete, one request in
# flight) with 50 connections over TLS against plaintext, on both protocols
# of one delayqd with TLS on, and Debian's beanstalkd (plaintext) beside
# them, in one run, all with the same client (build/tls_loadgen), so that
# the ratios compare transports and servers, not clients.
#
#   bash bench/tls_bench.sh [BUILD_DIR]        (default: build)
#
# A CA and a server certificate (P-256) are made with the openssl tool in a
# temporary directory. Each round starts a fresh server per protocol and
# runs plaintext and TLS on it back to back; the order alternates between
# rounds; each rate is the best of BENCH_ROUNDS rounds (default 5) of
# BENCH_SECONDS (2) after BENCH_WARMUP (0.5). The TLS-to-plaintext ratios
# are the median of each round's pair (tls_vs_plain_*; the pairs and the
# ratio of the best rates are printed beside it): on a noisy machine a
# pair measured seconds apart shares its noise, two bests need not. The
# handshakes are made before the measured time (connections are
# long-lived, as a queue's clients are).
#
# Beside the rates, the CPU time per job over the measured seconds, the
# least of the rounds: the server's (from /proc/PID/stat) and the client's.
# They are steadier than the rates on a noisy machine, and the server's is
# what TLS costs the server alone (the client pays for TLS as well, and
# the rates show both): server_capacity_tls_vs_plain_* is plaintext's
# server CPU per job over TLS's.
#
# tls_client_bound_vs_beanstalkd_c50: the rate at which the client would
# fill its core over TLS (its least CPU per job) against beanstalkd's best:
# on one machine, the most any server could show over TLS against
# beanstalkd's plaintext with this client.
#
# Output: `name: value` lines on stdout (jobs/s, CPU us per job, and the
# ratios tls_vs_beanstalkd_c50 and tls_vs_plain_*, the beanstalkd one
# last); progress on stderr. No figure is asserted.
set -euo pipefail

BUILD_DIR=${1:-build}
DELAYQD=$BUILD_DIR/delayqd
GEN=$BUILD_DIR/tls_loadgen
BEANSTALKD=${BEANSTALKD:-/usr/bin/beanstalkd}
SECS=${BENCH_SECONDS:-2}
WARMUP=${BENCH_WARMUP:-0.5}
ROUNDS=${BENCH_ROUNDS:-5}

die() { echo "tls_bench: $*" >&2; exit 1; }
for b in "$DELAYQD" "$GEN"; do [[ -x $b ]] || die "$b not found (make build)"; done
command -v openssl >/dev/null || die "openssl not found (Debian: apt-get install openssl)"

WORK=$(mktemp -d "${TMPDIR:-/tmp}/tls_bench.XXXXXX")
SERVER_PID=""
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cleanup() { stop_server 1; rm -rf "$WORK"; }
trap cleanup EXIT
trap 'exit 130' INT TERM

(
  cd "$WORK"
  ec='-newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes'
  # shellcheck disable=SC2086
  openssl req -x509 $ec -keyout ca.key -out ca.pem -days 2 -subj /CN=bench-ca
  # shellcheck disable=SC2086
  openssl req $ec -keyout server.key -out server.csr -subj /CN=localhost
  printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\n' >server.ext
  openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -set_serial 1 -days 2 \
    -extfile server.ext -out server.pem
) >"$WORK/openssl.log" 2>&1 || { cat "$WORK/openssl.log" >&2; die "cannot make certificates"; }

value_of() { sed -n "s/^$1: //p" <<<"$2"; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }

declare -A BEST LEAST LAST PAIRS
keep_best() {
  local cur=${BEST[$1]:-}
  if [[ -z $cur ]] || (($2 > cur)); then BEST[$1]=$2; fi
}
keep_least() {  # $2: a decimal
  [[ -n $2 ]] || return 0
  local cur=${LEAST[$1]:-}
  if [[ -z $cur ]] || awk -v a="$2" -v b="$cur" 'BEGIN { exit !(a < b) }'; then LEAST[$1]=$2; fi
}

# run NAME PORT PROTOCOL [--tls CA]
run() {
  local name=$1 port=$2 proto=$3 out v
  shift 3
  out=$("$GEN" --port "$port" --protocol "$proto" --connections 50 --seconds "$SECS" \
    --warmup "$WARMUP" --server-pid "$SERVER_PID" "$@" 2>"$WORK/err") ||
    { cat "$WORK/err" >&2; die "$name"; }
  v=$(value_of jobs_per_s "$out")
  echo "tls_bench: $name round: $v jobs/s (p99 $(value_of latency_p99_us "$out") us;" \
    "cpu us/job server $(value_of server_cpu_us_per_job "$out")," \
    "client $(value_of client_cpu_us_per_job "$out"))" >&2
  keep_best "$name" "${v%.*}"
  LAST[$name]=${v%.*}
  keep_least "${name%_jobs_per_s}_server_cpu_us_per_job" "$(value_of server_cpu_us_per_job "$out")"
  keep_least "${name%_jobs_per_s}_client_cpu_us_per_job" "$(value_of client_cpu_us_per_job "$out")"
}

delayqd_round() {
  local p
  for p in beanstalkd http; do
    start_delayqd_two_ports --tls-cert "$WORK/server.pem" --tls-key "$WORK/server.key"
    local port=$BEAN_PORT
    [[ $p == http ]] && port=$HTTP_PORT
    if (($1 % 2)); then
      run "${p}_plain_c50_jobs_per_s" "$port" "$p"
      run "${p}_tls_c50_jobs_per_s" "$port" "$p" --tls "$WORK/ca.pem"
    else
      run "${p}_tls_c50_jobs_per_s" "$port" "$p" --tls "$WORK/ca.pem"
      run "${p}_plain_c50_jobs_per_s" "$port" "$p"
    fi
    # This round's pair, measured seconds apart on one server.
    PAIRS[$p]+=" $(ratio "${LAST[${p}_tls_c50_jobs_per_s]}" "${LAST[${p}_plain_c50_jobs_per_s]}")"
    stop_server 1
  done
}

beanstalkd_round() {
  [[ -x $BEANSTALKD ]] || return 0
  local port
  port=$(free_port)
  "$BEANSTALKD" -l 127.0.0.1 -p "$port" >"$WORK/beanstalkd.log" 2>&1 &
  SERVER_PID=$!
  for _ in $(seq 250); do (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; sleep 0.02; done
  run server_beanstalkd_c50_jobs_per_s "$port" beanstalkd
  stop_server 1
}

for round in $(seq "$ROUNDS"); do
  if ((round % 2)); then
    delayqd_round "$round"
    beanstalkd_round
  else
    beanstalkd_round
    delayqd_round "$round"
  fi
  # This round's delayqd over TLS against its beanstalkd.
  if [[ -n ${LAST[server_beanstalkd_c50_jobs_per_s]:-} ]]; then
    PAIRS[vs_beanstalkd]+=" $(ratio "${LAST[beanstalkd_tls_c50_jobs_per_s]}" \
      "${LAST[server_beanstalkd_c50_jobs_per_s]}")"
  fi
done

for k in beanstalkd_plain_c50 beanstalkd_tls_c50 http_plain_c50 http_tls_c50; do
  echo "delayqd_${k}_jobs_per_s: ${BEST[${k}_jobs_per_s]}"
  echo "delayqd_${k}_server_cpu_us_per_job: ${LEAST[${k}_server_cpu_us_per_job]:-n/a}"
  echo "delayqd_${k}_client_cpu_us_per_job: ${LEAST[${k}_client_cpu_us_per_job]:-n/a}"
done
for p in http beanstalkd; do
  if [[ -n ${LEAST[${p}_plain_c50_server_cpu_us_per_job]:-} &&
    -n ${LEAST[${p}_tls_c50_server_cpu_us_per_job]:-} ]]; then
    echo "server_capacity_tls_vs_plain_${p}_c50: $(ratio \
      "${LEAST[${p}_plain_c50_server_cpu_us_per_job]}" "${LEAST[${p}_tls_c50_server_cpu_us_per_job]}")"
  fi
done
if [[ -n ${BEST[server_beanstalkd_c50_jobs_per_s]:-} ]]; then
  echo "beanstalkd_1.12_plain_c50_jobs_per_s: ${BEST[server_beanstalkd_c50_jobs_per_s]}"
  echo "beanstalkd_1.12_plain_c50_server_cpu_us_per_job:" \
    "${LEAST[server_beanstalkd_c50_server_cpu_us_per_job]:-n/a}"
  echo "tls_vs_beanstalkd_c50_rounds:${PAIRS[vs_beanstalkd]:-}"
  echo "tls_vs_beanstalkd_c50_best: $(ratio "${BEST[beanstalkd_tls_c50_jobs_per_s]}" \
    "${BEST[server_beanstalkd_c50_jobs_per_s]}")"
  # The client shares the machine: at its least CPU per job over TLS, a
  # whole core of it, no server could be measured faster over TLS with it.
  if [[ -n ${LEAST[beanstalkd_tls_c50_client_cpu_us_per_job]:-} ]]; then
    bound=$(awk -v c="${LEAST[beanstalkd_tls_c50_client_cpu_us_per_job]}" \
      'BEGIN { printf "%.0f", 1e6 / c }')
    echo "tls_client_bound_c50_jobs_per_s: $bound"
    echo "tls_client_bound_vs_beanstalkd_c50: $(ratio "$bound" "${BEST[server_beanstalkd_c50_jobs_per_s]}")"
  fi
  echo "tls_vs_beanstalkd_c50: $(median "${PAIRS[vs_beanstalkd]:-}")"
fi
for p in http beanstalkd; do
  echo "tls_vs_plain_${p}_c50_rounds:${PAIRS[$p]}"
  echo "tls_vs_plain_${p}_c50_best: $(ratio "${BEST[${p}_tls_c50_jobs_per_s]}" \
    "${BEST[${p}_plain_c50_jobs_per_s]}")"
  echo "tls_vs_plain_${p}_c50: $(median "${PAIRS[$p]}")"
done
