"""Benchmark: analysing a 200-claim claims section (target: under 50 ms on one CPU core).

The section is built from the real US claims in tests/fixtures/patents/: the patents' claims are
concatenated in order and renumbered (every number inside a reference phrase shifted with its
claim), up to exactly 200 claims; the build is checked against the truth files before timing.
Timed: `analyse_text` end to end (section, splitting, references, structure, antecedent basis,
findings, tree, pydantic models), and separately the JSON export.

    python tests/benchmarks/bench_patents.py [--runs 60] [--claims 200]
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

ROOT = Path(__file__).resolve().parents[2]
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
                    edits.append((a, b, re.sub(r"\d+", lambda m: str(int(m.group()) + base), body[a:b])))
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
    args = ap.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})  # one CPU core
    text, truth = build_section(args.claims)
    result = analyse_text(text)
    got = {c.number: c.depends_on for c in result.claims}
    # "one or more of the previous claims" in a concatenated set names every earlier claim
    wrong = [n for n in truth if got.get(n) != truth[n] and not (set(truth[n]) <= set(got.get(n, [])))]
    assert len(result.claims) == args.claims and not wrong, wrong[:5]
    for _ in range(5):
        analyse_text(text)
    times, json_times = [], []
    for _ in range(args.runs):
        t0 = time.perf_counter()
        r = analyse_text(text)
        t1 = time.perf_counter()
        r.model_dump_json()
        t2 = time.perf_counter()
        times.append((t1 - t0) * 1000)
        json_times.append((t2 - t1) * 1000)
    times.sort()
    json_times.sort()

    def p95(xs: list[float]) -> float:
        return xs[min(len(xs) - 1, round(0.95 * (len(xs) - 1)))]

    print(f"patents benchmark: {args.claims}-claim section, {len(text)} chars, {args.runs} runs, one core, "
          f"Python {platform.python_version()}")
    print(f"  analyse_text: median {statistics.median(times):.1f} ms, p95 {p95(times):.1f} ms, min {times[0]:.1f} ms")
    print(f"  JSON export:  median {statistics.median(json_times):.1f} ms, p95 {p95(json_times):.1f} ms")
    ok = statistics.median(times) < 50
    print(f"  target < 50 ms (median): {'met' if ok else 'NOT met'}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
