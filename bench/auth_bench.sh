#!/usr/bin/env bash
# auth_bench.sh: what tokens cost (docs/security.md). The same delayqd build,
# fresh for every measurement (--in-memory), once open to loopback (no
# token, the default) and once with --trusted-networks none and a token on
# every connection and request: a token scoped to the benchmark's topic
# (`bench*`, produce and consume), so that every delete or finish by id has
# its job's topic looked up, as a worker's token would.
#
#   bash bench/auth_bench.sh [BUILD_DIR]        (default: build)
#
# Measurements, lifecycle (put -> reserve -> delete/finish) with 50
# connections, each the median of BENCH_ROUNDS rounds, the two set-ups
# run back to back within a round, their order alternating; the ratios
# token/open are the median of each round's pair (the pairs, and the ratio
# of the medians, are printed beside it: on a noisy machine a pair
# measured seconds apart shares its noise):
#   beanstalk_{open,token}_lifecycle_c50_jobs_per_s   build/loadgen (--auth)
#   http_{open,token}_lifecycle_c50_jobs_per_s        build/http_loadgen (--token)
#
# Output: `name: value` lines on stdout, ratios token/open last (the
# headline, `beanstalk_token_vs_open_lifecycle_c50`, at the very end);
# progress on stderr. Knobs: BENCH_SECONDS (3), BENCH_WARMUP (0.5),
# BENCH_ROUNDS (5).
set -euo pipefail

BUILD_DIR=${1:-build}
DELAYQD=$BUILD_DIR/delayqd
DELAYQ=$BUILD_DIR/delayq
LOADGEN=$BUILD_DIR/loadgen
HTTP_LOADGEN=$BUILD_DIR/http_loadgen
SECS=${BENCH_SECONDS:-3}
WARMUP=${BENCH_WARMUP:-0.5}
ROUNDS=${BENCH_ROUNDS:-5}

die() { echo "auth_bench: $*" >&2; exit 1; }
for b in "$DELAYQD" "$DELAYQ" "$LOADGEN" "$HTTP_LOADGEN"; do
  [[ -x $b ]] || die "$b not found (make build)"
done

WORK=$(mktemp -d "${TMPDIR:-/tmp}/auth_bench.XXXXXX")
SERVER_PID=""
BEAN_PORT=""
HTTP_PORT=""
# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cleanup() { stop_server 1; rm -rf "$WORK"; }
trap cleanup EXIT
trap 'exit 130' INT TERM

# The token: a new secret (delayq token), and a token file with its digest.
"$DELAYQ" -o json token bench -t 'bench*' -r produce,consume >"$WORK/token.json"
SECRET=$(sed -n 's/.*"secret":"\([^"]*\)".*/\1/p' "$WORK/token.json")
DIGEST=$(sed -n 's/.*"sha256":"\([^"]*\)".*/\1/p' "$WORK/token.json")
[[ -n $SECRET && -n $DIGEST ]] || die "no token in $(cat "$WORK/token.json")"
cat >"$WORK/tokens.toml" <<TOML
[[token]]
name = "bench"
sha256 = "$DIGEST"
topics = ["bench*"]
rights = ["produce", "consume"]
TOML

# start_delayqd open|token
start_delayqd() {
  if [[ $1 == token ]]; then
    start_delayqd_two_ports --auth-file "$WORK/tokens.toml" --trusted-networks none
  else
    start_delayqd_two_ports
  fi
}

value_of() { sed -n "s/^$1: //p" <<<"$2"; }

declare -A RUNS
# run <beanstalk|http> <open|token>
run() {
  local proto=$1 how=$2 out name="${1}_${2}_lifecycle_c50_jobs_per_s"
  start_delayqd "$how"
  local auth=()
  if [[ $proto == beanstalk ]]; then
    [[ $how == token ]] && auth=(--auth "$SECRET")
    out=$("$LOADGEN" --port "$BEAN_PORT" --tube bench --connections 50 --mode lifecycle \
      --seconds "$SECS" --warmup "$WARMUP" "${auth[@]}" 2>"$WORK/err") ||
      { cat "$WORK/err" >&2; die "$name"; }
  else
    [[ $how == token ]] && auth=(--token "$SECRET")
    out=$("$HTTP_LOADGEN" --port "$HTTP_PORT" --connections 50 --mode lifecycle \
      --seconds "$SECS" --warmup "$WARMUP" "${auth[@]}" 2>"$WORK/err") ||
      { cat "$WORK/err" >&2; die "$name"; }
  fi
  stop_server 1
  local v
  v=$(value_of jobs_per_s "$out")
  echo "auth_bench: $name round: $v jobs/s" >&2
  RUNS[$name]="${RUNS[$name]:-} ${v%.*}"
  LAST[$name]=${v%.*}
}

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", (b > 0 ? a / b : 0) }'; }

declare -A LAST PAIRS
for round in $(seq "$ROUNDS"); do
  if ((round % 2)); then order=(open token); else order=(token open); fi
  for proto in beanstalk http; do
    for how in "${order[@]}"; do run "$proto" "$how"; done
    # This round's pair, measured back to back.
    PAIRS[$proto]+=" $(ratio "${LAST[${proto}_token_lifecycle_c50_jobs_per_s]}" \
      "${LAST[${proto}_open_lifecycle_c50_jobs_per_s]}")"
  done
done

declare -A MED
for k in "${!RUNS[@]}"; do MED[$k]=$(median "${RUNS[$k]}"); done
for proto in http beanstalk; do
  for how in open token; do
    k="${proto}_${how}_lifecycle_c50_jobs_per_s"
    echo "$k: ${MED[$k]}"
  done
done
for proto in http beanstalk; do
  echo "${proto}_token_vs_open_lifecycle_c50_rounds:${PAIRS[$proto]}"
  echo "${proto}_token_vs_open_lifecycle_c50_of_medians: $(ratio \
    "${MED[${proto}_token_lifecycle_c50_jobs_per_s]}" "${MED[${proto}_open_lifecycle_c50_jobs_per_s]}")"
  echo "${proto}_token_vs_open_lifecycle_c50: $(median "${PAIRS[$proto]}")"
done
