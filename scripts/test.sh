#!/usr/bin/env bash
# Set everything up and run the tests. Extra arguments go to pytest.
#   scripts/test.sh          the default a contributor runs: everything but the tests marked
#                            `model` (the real Gemma 3 270M), `e2e` (a browser) and `slow`
#                            (about 6 minutes on 2 cores; README, "Tests")
#   scripts/test.sh --all    the whole suite, as CI runs it (about 14 minutes on 2 cores), with a
#                            headless Chromium for the browser test where it can be installed
set -euo pipefail
cd "$(dirname "$0")/.."
all=0
if [ "${1:-}" = "--all" ]; then
  all=1
  shift
fi
scripts/setup.sh
if [ "$all" = 0 ]; then
  exec .venv/bin/python -m pytest -m "not model and not e2e and not slow" "$@"
fi

# The end-to-end UI test drives Debian's chromium; install it when we can (root + apt-get).
if ! command -v chromium >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium fonts-wqy-microhei >/dev/null) \
    || echo "test: could not install chromium; the browser test will be skipped" >&2
fi

exec .venv/bin/python -m pytest "$@"
