#!/usr/bin/env bash
# bench_smoke.sh BUILD_DIR: runs bench/server_bench.sh's in-memory part at a
# token size (a fraction of a second per figure, one round) and fails unless
# every figure it reports is a number: the load generators, the ceiling
# server, delayqd and beanstalkd all ran and answered in every mode; then
# its durable part and bench/put_budget.sh likewise. The figures
# themselves mean nothing at this size and are not checked.
set -euo pipefail

BUILD_DIR=${1:?usage: bench_smoke.sh BUILD_DIR}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT=$(mktemp)
ERR=$(mktemp)
trap 'rm -f "$OUT" "$OUT.durable" "$OUT.budget" "$ERR"' EXIT

rc=0
BENCH_ONLY=memory BENCH_ROUNDS=1 BENCH_SECONDS=0.2 BENCH_WARMUP=0.05 \
  BENCH_LATENESS_SECONDS=0.5 BENCH_LATENESS_RATE=500 \
  bash "$ROOT/bench/server_bench.sh" "$BUILD_DIR" >"$OUT" 2>"$ERR" || rc=$?
if ((rc != 0)); then
  echo "bench_smoke: server_bench.sh exited $rc" >&2
  cat "$ERR" >&2
  exit 1
fi

# Every figure of the in-memory part, the ceiling's included, is a number.
missing=$(grep -E '^(plain_|)(beanstalkd|delayq|ceiling|lifecycle|put|pipeline|lateness|trickle)' "$OUT" |
  grep -v '_durable_\|^durable_' | grep -vE ': -?[0-9]+(\.[0-9]+)?$' || true)
if [[ -n $missing ]]; then
  echo "bench_smoke: figures without a value:" >&2
  echo "$missing" >&2
  cat "$ERR" >&2
  exit 1
fi
for want in ceiling_lifecycle_c50_jobs_per_s delayq_vs_ceiling_lifecycle_c10 \
  lifecycle_busy_vs_beanstalkd_c10 ceiling_lifecycle_busy_c1_jobs_per_s \
  lifecycle_no_poll_vs_beanstalkd_c1 trickle_cpu_poll_over_no_poll \
  lateness_p99_delayq_ms_over_beanstalkd_s plain_delayq_lifecycle_c50_jobs_per_s \
  plain_lifecycle_c1_vs_beanstalkd plain_pipeline_c4_d64_vs_beanstalkd \
  plain_lifecycle_c50_client_bound_vs_beanstalkd plain_lifecycle_c50_vs_beanstalkd_median_of_rounds \
  lifecycle_vs_beanstalkd_c1_median_of_rounds; do
  # A number; the lateness ratio is negative when delayqd's p99 was early.
  if ! grep -qE "^$want: -?[0-9.]+$" "$OUT"; then
    echo "bench_smoke: no figure $want" >&2
    cat "$OUT" >&2
    exit 1
  fi
done
# The durable part at a token size: both servers keep their jobs on disk
# under both policies, and delayqd's syncs are counted. (One connection and
# the pipelined puts: beanstalkd -f 0 syncs each change apart, and 50
# connections of it may not finish a job in a fraction of a second on a
# slow disk.)
if ! BENCH_ONLY=durable BENCH_ROUNDS=1 BENCH_SECONDS=0.5 BENCH_WARMUP=0.05 \
  BENCH_DURABLE_TAGS="lifecycle_c1 pipeline_c4_d64" \
  bash "$ROOT/bench/server_bench.sh" "$BUILD_DIR" >"$OUT.durable" 2>"$ERR"; then
  echo "bench_smoke: server_bench.sh's durable part failed" >&2
  cat "$ERR" >&2
  exit 1
fi
for want in fdatasync_per_s_preallocated fdatasync_per_s_appending \
  delayq_durable_always_lifecycle_c1_syncs_per_s durable_always_pipeline_c4_d64_vs_beanstalkd \
  durable_everysec_pipeline_c4_d64_vs_beanstalkd plain_durable_always_lifecycle_c1_vs_beanstalkd \
  plain_durable_always_lifecycle_c1_vs_beanstalkd_median_of_rounds; do
  if ! grep -qE "^$want: [0-9.]+$" "$OUT.durable"; then
    echo "bench_smoke: no figure $want in the durable part" >&2
    cat "$OUT.durable" "$ERR" >&2
    exit 1
  fi
done
# bench/put_budget.sh at its least (one round of 3 s a server): every
# figure a number, and its headlines last; or, without two CPUs or
# taskset, skipped with its headlines n/a.
if ! BUDGET_ROUNDS=1 BUDGET_SECONDS=3 bash "$ROOT/bench/put_budget.sh" "$BUILD_DIR" \
  >"$OUT.budget" 2>"$ERR"; then
  echo "bench_smoke: put_budget.sh failed" >&2
  cat "$ERR" >&2
  exit 1
fi
if grep -q '^put_budget: skipped' "$ERR"; then
  if [[ $(cat "$OUT.budget") != $'budget_durable_over_memory_user_us_per_put: n/a\nbudget_durable_over_memory_us_per_put: n/a' ]]; then
    echo "bench_smoke: put_budget.sh skipped without its headlines n/a:" >&2
    cat "$OUT.budget" "$ERR" >&2
    exit 1
  fi
  echo "bench_smoke: $(grep '^put_budget: skipped' "$ERR")"
else
  bad=$(grep -vE '^budget_[A-Za-z0-9_]+: -?[0-9]+(\.[0-9]+)?$' "$OUT.budget" || true)
  for server in ceiling beanstalkd delayq_memory delayq_everysec; do
    for figure in jobs_per_s us_per_put user_us_per_put kernel_us_per_put; do
      grep -qE "^budget_${server}_${figure}_median: " "$OUT.budget" ||
        bad+=$'\n'"no budget_${server}_${figure}_median"
    done
  done
  if [[ -n $bad || $(tail -2 "$OUT.budget" | cut -d: -f1 | tr '\n' ' ') != \
    "budget_durable_over_memory_user_us_per_put budget_durable_over_memory_us_per_put " ]]; then
    echo "bench_smoke: put_budget.sh's figures:$bad" >&2
    cat "$OUT.budget" "$ERR" >&2
    exit 1
  fi
fi
# The headline comes last.
last=$(tail -1 "$OUT")
if [[ $last != lifecycle_vs_beanstalkd_c50:* ]]; then
  echo "bench_smoke: the last line is '$last', not the headline" >&2
  exit 1
fi
echo "bench_smoke: $(grep -c ': ' "$OUT") figures, all with values"
