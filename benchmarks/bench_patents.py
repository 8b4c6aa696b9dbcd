"""Benchmark: analysing a 200-claim claims section (target: under 50 ms on one CPU core).

The section is built from the real US claims in tests/fixtures/patents/: the patents' claims are
concatenated in order and renumbered (every number inside a reference phrase shifted with its
claim), up to exactly 200 claims; the build is checked against the truth files before timing.
Timed: `analyse_text` end to end (section, splitting, references, structure, antecedent basis,
findings, tree, pydantic models), and separately the JSON export.

    python benchmarks/bench_patents.py [--runs 60] [--claims 200]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pipelines.patents.pipeline import analyse_text  # noqa: E402

FIXTURES = ROOT / "tests" / "fixtures" / "patents"


def build_section(n_claims: int = 200) -> tuple[str, dict[int, list[int]]]:
    """A claims section of `n_claims` real claims, renumbered, and its expected dependencies."""
    parts: list[str] = []
    truth: dict[int, list[int]] = {}
    base = 0
    ids = sorted(p.name[: -len(".truth.json")] for p in FIXTURES.glob("US*.truth.json"))
    while base < n_claims:
        for pid in ids:
            if base >= n_claims:
                break
            text = (FIXTURES / f"{pid}.txt").read_text(encoding="utf-8")
            known = json.loads((FIXTURES / f"{pid}.truth.json").read_text(encoding="utf-8"))
            result = analyse_text(text)
            expected = {c["number"]: c["depends_on"] for c in known["claims"]}
            assert {c.number: c.depends_on for c in result.claims} == expected, pid
            for c in result.claims:
                if base + c.number > n_claims:
                    break
                body = c.text
                # shift the numbers inside reference phrases (offsets relative to the claim)
                edits = []
                for r in c.references:
                    a, b = r.span.char_start - c.span.char_start, r.span.char_end - c.span.char_start
                    edits.append((a, b, re.sub(r"\d+", lambda m, off=base: str(int(m.group()) + off), body[a:b])))
                for a, b, new in sorted(edits, reverse=True):
                    body = body[:a] + new + body[b:]
                body = re.sub(r"^\d+", str(base + c.number), body)
                parts.append(body)
                truth[base + c.number] = [d + base for d in c.depends_on]
            base += len(result.claims)
    text = "What is claimed is:\n\n" + "\n\n".join(parts) + "\n"
    return text, truth


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=60)
    ap.add_argument("--claims", type=int, default=200)
    ap.add_argument("--pin", action="store_true", help="pin the process to one CPU core (sched_setaffinity)")
    args = ap.parse_args()
    if args.pin and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
    text, truth = build_section(args.claims)
    result = analyse_text(text)
    got = {c.number: c.depends_on for c in result.claims}
    # "one or more of the previous claims" in a concatenated set names every earlier claim
    wrong = [n for n in truth if got.get(n) != truth[n] and not (set(truth[n]) <= set(got.get(n, [])))]
    assert len(result.claims) == args.claims and not wrong, wrong[:5]
    for _ in range(5):
        analyse_text(text)
    wall, cpu, json_wall = [], [], []
    for _ in range(args.runs):
        c0, t0 = time.process_time(), time.perf_counter()
        r = analyse_text(text)
        t1, c1 = time.perf_counter(), time.process_time()
        r.model_dump_json()
        t2 = time.perf_counter()
        wall.append((t1 - t0) * 1000)
        cpu.append((c1 - c0) * 1000)
        json_wall.append((t2 - t1) * 1000)

    def p95(xs: list[float]) -> float:
        xs = sorted(xs)
        return xs[min(len(xs) - 1, round(0.95 * (len(xs) - 1)))]

    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"patents benchmark: {args.claims}-claim section, {len(text)} chars, {args.runs} runs, single-threaded, "
          f"Python {platform.python_version()}, {os.cpu_count()} CPUs, load average {load:.1f}")
    print(f"  analyse_text CPU time:  median {statistics.median(cpu):.1f} ms, p95 {p95(cpu):.1f} ms, min {min(cpu):.1f} ms")
    print(f"  analyse_text wall time: median {statistics.median(wall):.1f} ms, p95 {p95(wall):.1f} ms, min {min(wall):.1f} ms")
    print(f"  JSON export wall time:  median {statistics.median(json_wall):.1f} ms, p95 {p95(json_wall):.1f} ms")
    ok = statistics.median(cpu) < 50
    print(f"  target < 50 ms on one core (median CPU time): {'met' if ok else 'NOT met'}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
