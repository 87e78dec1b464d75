#!/usr/bin/env bash
# Runs the Node.js client test (jackd.test.js) against a delayqd it starts.
#   run.sh [path/to/delayqd]     (default: $DELAYQD, else build/delayqd)
# Installs the pinned client (package-lock.json) into node_modules with
# `npm ci` the first time; later runs reuse it (offline).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
if [[ $# -ge 1 ]]; then
  export DELAYQD="$1"
fi
command -v node >/dev/null || { echo "run.sh: node is not installed (scripts/setup.sh)" >&2; exit 1; }
cd "${here}"
# Two test runs (e.g. build/ and build-asan/) may start at once: install
# under a lock, and only when the pinned version is missing.
if [[ ! -f node_modules/jackd/package.json ]]; then
  (
    flock 9
    if [[ ! -f node_modules/jackd/package.json ]]; then
      command -v npm >/dev/null || { echo "run.sh: npm is not installed (scripts/setup.sh)" >&2; exit 1; }
      npm ci --no-audit --no-fund --loglevel=error
    fi
  ) 9>"${here}/.npm-install.lock"
fi
exec node --test --test-concurrency=1 --test-timeout=60000 --test-reporter=spec jackd.test.js
