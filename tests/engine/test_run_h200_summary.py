"""benchmarks/run_h200.sh ends every stage with one pass/fail line and repeats them all at the end
(and in $OUT/summary.txt): checked with stand-in commands on the CPU."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(shutil.which("bash") is None or shutil.which("timeout") is None, reason="needs bash and timeout")
def test_each_stage_prints_one_verdict_line(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    # python3 stand-in: the kernels stage passes, the profile stage fails
    (bin_dir / "python3").write_text(
        "#!/usr/bin/env bash\n"
        'case "$*" in\n'
        '  *bench_kernels*) echo "kernels: 12 rows"; exit 0;;\n'
        '  *profile_engine_gpu*) echo "Traceback: boom"; exit 3;;\n'
        "esac\nexit 0\n"
    )
    (bin_dir / "python3").chmod(0o755)
    out = tmp_path / "out"
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "OUT": str(out)}
    r = subprocess.run(["bash", str(ROOT / "benchmarks/run_h200.sh"), "kernels,profile"], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=60)
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("STAGE ")]
    assert lines[:2] == lines[2:], r.stdout  # each stage's line, then the summary repeats them
    assert lines[0].startswith("STAGE kernels: PASS (exit 0,") and lines[0].endswith("kernels: 12 rows")
    assert lines[1].startswith("STAGE profile: FAIL (exit 3,") and lines[1].endswith("Traceback: boom")
    assert (out / "summary.txt").read_text().splitlines() == lines[:2]
