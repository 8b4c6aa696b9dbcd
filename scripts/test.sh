#!/usr/bin/env bash
# Set everything up (including a headless Chromium for the browser test where it can be
# installed) and run the whole test suite. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh

# The end-to-end UI test drives Debian's chromium; install it when we can (root + apt-get).
if ! command -v chromium >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium fonts-wqy-microhei >/dev/null) \
    || echo "test: could not install chromium; the browser test will be skipped" >&2
fi

exec .venv/bin/python -m pytest "$@"
