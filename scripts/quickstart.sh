#!/usr/bin/env bash
# Quick start: set everything up, then run every pipeline over the bundled samples into out/.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
.venv/bin/longdoc batch data/samples --out out "$@"
