#!/usr/bin/env bash
# A/B of `longdoc bench` (1K prompt, 32 new tokens, 2 rounds, CPU, JSON) between an older commit
# checked out as a worktree at $BASE and this checkout, alternating, same venv, same run. Usage from
# the repo root: git worktree add /tmp/base REV; BASE=/tmp/base bash benchmarks/ab_engine_before_after.sh
set -u
PY=${PY:-$(pwd)/.venv/bin/python}
for round in 1 2; do
  for side in base main; do
    if [ $side = base ]; then dir=${BASE:?set BASE to a worktree of the older commit}; else dir=$(pwd); fi
    echo "== $side round $round"
    (cd $dir && PYTHONPATH=$dir $PY -c "import sys; sys.argv=['longdoc','bench','--prompt-length','1024','--max-new-tokens','32','--repeat','2','--device','cpu','--output-format','json']; from app.cli import main; main()") 2>/dev/null
  done
done
