#!/usr/bin/env bash
# The GPU image has torch, triton and transformers but not pydantic, which pipelines/ needs (the LLM
# layer's benchmarks import pipelines.documents). This unpacks pydantic's wheels for the image's
# Python (3.12, x86_64) into .gpu_pylib/ (git-ignored, ~8 MB): carry it in the device call
# (carry: [".gpu_pylib"]) and run_h200.sh puts it on PYTHONPATH.
set -euo pipefail
cd "$(dirname "$0")/.."
py=${PY:-.venv/bin/python}
vers() { "$py" -c "import importlib.metadata as m; print(m.version('$1'))"; }
tmp=$(mktemp -d)
"$py" -m pip download --no-deps --only-binary=:all: --python-version 3.12 \
  --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 -d "$tmp" \
  "pydantic==$(vers pydantic)" "pydantic_core==$(vers pydantic_core)" \
  "annotated-types==$(vers annotated-types)" "typing-inspection==$(vers typing-inspection)"
rm -rf .gpu_pylib && mkdir -p .gpu_pylib
for w in "$tmp"/*.whl; do "$py" -m zipfile -e "$w" .gpu_pylib; done
rm -rf "$tmp"
echo "gpu_pylib: $(du -sh .gpu_pylib | cut -f1) in .gpu_pylib"
