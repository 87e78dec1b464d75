#!/usr/bin/env bash
# Installs the Debian packages delayq needs to build, test and run.
#
# Idempotent: asks dpkg which packages are missing and only then runs
# apt-get (update + install). Quiet when everything is already present.
# Works as root (CI) and, as another user, through sudo when available.
#
# To add a dependency, append its Debian package name to PACKAGES below.
set -euo pipefail

PACKAGES=(
  # toolchain and build
  build-essential
  g++
  cmake
  ninja-build
  pkg-config
  clang
  libclang-rt-14-dev  # clang's ASan/UBSan runtimes
  clang-format        # make format
  # libraries of the server
  libboost-dev        # Asio (networking)
  libspdlog-dev       # logging
  libfmt-dev
  libtomlplusplus-dev # config file
  libcli11-dev        # command-line flags
  rapidjson-dev       # JSON of the HTTP API
  librocksdb-dev      # the embedded store
  libhiredis-dev      # RESP client of the Redis backend
  liburing-dev        # batched socket calls of the beanstalkd connections
  libhowardhinnant-date-dev  # time zones of the schedules' cron expressions (date-tz)
  tzdata              # the system's tzdb that date-tz reads
  libcurl4-openssl-dev  # pushes to HTTP targets (curl's multi interface)
  libssl-dev          # OpenSSL: TLS (listeners, rediss://), token digests and secrets
  libjemalloc-dev     # delayqd's allocator (docs/decisions.md)
  # tests and benchmarks
  libgtest-dev
  libgmock-dev
  libbenchmark-dev
  beanstalkd          # the peer the load benchmark compares against
  curl                # runs the examples of docs/http-api.md in their test; HTTPS in the TLS test
  openssl             # the TLS test's certificates and its s_client
  ruby-beaneater      # a real beanstalkd client for the black-box tests
  ruby                # runs it (ruby-beaneater does not depend on ruby)
  redis-server        # the Redis the Redis backend's tests start
  openssl             # the TLS tests make their certificates with it
  valgrind            # bench/redis_call_cost.sh, delayqd_redis_cost.sh count instructions per job
  prometheus          # promtool checks GET /metrics; the scrape test runs a real Prometheus
  chromium            # the dashboard's browser test (tests/ui), driven by playwright-core
)
# Node.js with npm (for the npm beanstalkd client in the black-box tests):
# keep a Node.js that is already there (it may not be Debian's, and Debian's
# npm package would conflict with it); otherwise take Debian's.
if ! command -v npm >/dev/null 2>&1; then
  PACKAGES+=(nodejs npm)
fi
# Python 3 (docs/push.md's signature check runs in its test): likewise,
# keep one that is there.
if ! command -v python3 >/dev/null 2>&1; then
  PACKAGES+=(python3)
fi

missing=()
for pkg in "${PACKAGES[@]}"; do
  status="$(dpkg-query -W -f='${Status}' "${pkg}" 2>/dev/null || true)"
  if [[ "${status}" != "install ok installed" ]]; then
    missing+=("${pkg}")
  fi
done

if ((${#missing[@]} == 0)); then
  echo "setup: all ${#PACKAGES[@]} Debian packages present."
  exit 0
fi

if [[ "$(id -u)" -eq 0 ]]; then
  as_root=()
elif command -v sudo >/dev/null 2>&1; then
  as_root=(sudo)
else
  echo "setup: missing packages: ${missing[*]}" >&2
  echo "setup: not root and sudo is not available; install them as root:" >&2
  echo "  apt-get update && apt-get install -y --no-install-recommends ${missing[*]}" >&2
  exit 1
fi

echo "setup: installing missing packages: ${missing[*]}"
"${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update
"${as_root[@]}" env DEBIAN_FRONTEND=noninteractive \
  apt-get install -y --no-install-recommends "${missing[@]}"
echo "setup: done."
