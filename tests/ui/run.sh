#!/usr/bin/env bash
# Runs the dashboard's browser test (ui.test.js) against delayqd processes
# it starts, in headless Debian Chromium (scripts/setup.sh installs it).
#   run.sh [path/to/delayqd]     (default: $DELAYQD, else build/delayqd)
# Installs the pinned playwright-core (package-lock.json) into node_modules
# with `npm ci` the first time; later runs reuse it (offline). Screenshots
# go to $DELAYQ_UI_SCREENSHOTS (default: tests/ui/screenshots/).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
if [[ $# -ge 1 ]]; then
  export DELAYQD="$1"
fi
command -v node >/dev/null || { echo "run.sh: node is not installed (scripts/setup.sh)" >&2; exit 1; }
browser="${CHROMIUM:-/usr/bin/chromium}"
[[ -x "${browser}" ]] || { echo "run.sh: no browser at ${browser} (scripts/setup.sh installs Debian's chromium)" >&2; exit 1; }
cd "${here}"
# Two test runs (build/ and build-asan/) may start at once: install under a
# lock, and only when the pinned version is missing.
if [[ ! -f node_modules/playwright-core/package.json ]]; then
  (
    flock 9
    if [[ ! -f node_modules/playwright-core/package.json ]]; then
      command -v npm >/dev/null || { echo "run.sh: npm is not installed (scripts/setup.sh)" >&2; exit 1; }
      npm ci --no-audit --no-fund --loglevel=error
    fi
  ) 9>"${here}/.npm-install.lock"
fi
exec node --test --test-concurrency=1 --test-timeout=120000 --test-reporter=spec ui.test.js
