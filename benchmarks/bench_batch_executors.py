"""Documents per minute of `longdoc batch` through the local and the Ray executor, 1 and 2 workers
(issue 17), and Ray's overhead per task.

Builds, in a temporary folder (nothing is committed): 200 patent claim sets (copies of the patent
texts in data/samples/patents and SHARED/corpus/patents, each with its copy number appended to its
last line, so every input hash differs) and 50 contract pairs (copies of the sample pairs, v2 with
the copy number appended), and 200 tiny patent inputs (one one-line claim) for the overhead. Each run
is the real CLI in a fresh process (`longdoc batch … --force --llm off -q --json`); the rate is taken
from summary.json's elapsed_s (the batch itself: for Ray, after Ray and its actors started) and the
wall time of the whole command is reported beside it (Ray's start included).

    .venv/bin/python -m benchmarks.bench_batch_executors [--corpus ../shared/corpus] [--out FILE]
        [--only patents|contracts|tiny|overhead ...]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def make_patents(folder: Path, corpus: Path | None, n: int = 200) -> None:
    srcs = sorted((ROOT / "data" / "samples" / "patents").glob("*.txt"))
    if corpus is not None:
        srcs += sorted((corpus / "patents").glob("*.txt"))
    texts = {}
    for p in srcs:
        texts.setdefault(p.name, p.read_text(encoding="utf-8"))
    names = sorted(texts)
    folder.mkdir(parents=True)
    for i in range(n):
        name = names[i % len(names)]
        text = texts[name].rstrip("\n")
        (folder / f"{i:03d}_{name}").write_text(f"{text} (copy {i})\n", encoding="utf-8")


def make_contracts(folder: Path, n: int = 50) -> None:
    pairs = sorted(p for p in (ROOT / "data" / "samples" / "contracts").iterdir() if p.is_dir())
    for i in range(n):
        src = pairs[i % len(pairs)]
        dst = folder / f"{i:02d}_{src.name}"
        dst.mkdir(parents=True)
        for v in sorted(src.iterdir()):
            text = v.read_text(encoding="utf-8")
            if v.stem == "v2":
                text = text.rstrip("\n") + f" (copy {i})\n"
            (dst / v.name).write_text(text, encoding="utf-8")


def make_tiny(folder: Path, n: int = 200) -> None:
    folder.mkdir(parents=True)
    for i in range(n):
        (folder / f"t{i:03d}.txt").write_text(f"1. A widget number {i} comprising a part.\n", encoding="utf-8")


def run(folder: Path, pipeline: str, out: Path, executor: str, jobs: int) -> dict:
    cmd = [str(Path(sys.executable)), "-m", "app.cli", "batch", str(folder), "-p", pipeline, "-o", str(out),
           "--force", "--llm", "off", "-q", "--json", "--executor", executor, "--jobs", str(jobs)]
    env = dict(os.environ, LONGDOC_LLM="off")
    load_before = os.getloadavg()[0]
    t0 = time.perf_counter()
    res = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT)
    wall = time.perf_counter() - t0
    summary = json.loads(res.stdout)
    c = summary["counts"]
    elapsed = summary["elapsed_s"]
    return {"pipeline": pipeline, "executor": executor, "jobs": jobs, "inputs": c["total"], "ok": c["ok"],
            "failed": c["failed"], "batch_s": elapsed, "wall_s": round(wall, 2),
            "docs_per_min": round(60 * c["ok"] / elapsed, 1), "docs_per_min_wall": round(60 * c["ok"] / wall, 1),
            "load_before": round(load_before, 2), "load_after": round(os.getloadavg()[0], 2),
            "exit": res.returncode}


def overhead(folder: Path, n: int = 200) -> dict:
    """Ray's cost per task, without the driver's writes: the same tiny inputs' compute (a) called
    inline, (b) sent to one actor one at a time (`ray.get(actor.run.remote(task))`), (c) through
    LocalExecutor(1) and RayExecutor(1) with a TaskWork whose check and write do nothing."""
    from app.batch import BATCH_WORK, LocalExecutor, TaskWork, compute_task, plan
    from app.ray_executor import RayExecutor

    tasks = plan(folder, folder.parent / "out-overhead", "patents", force=True)[:n]
    work = TaskWork(check=lambda t: None, compute=BATCH_WORK.compute, write=lambda t, c: c.outcome)
    out: dict = {"set": "overhead", "tasks": len(tasks), "load_before": round(os.getloadavg()[0], 2)}
    for t in tasks[:5]:  # warm: pipeline loaded
        compute_task(t)
    t0 = time.perf_counter()
    for t in tasks:
        compute_task(t)
    out["inline_ms_per_task"] = round(1000 * (time.perf_counter() - t0) / len(tasks), 2)
    t0 = time.perf_counter()
    list(LocalExecutor(1).run(work, tasks))
    out["local_executor_ms_per_task"] = round(1000 * (time.perf_counter() - t0) / len(tasks), 2)
    ex = RayExecutor(1)
    t0 = time.perf_counter()
    ex.start(tasks, work)
    out["ray_start_s"] = round(time.perf_counter() - t0, 2)
    actor = next(iter(ex.actors))
    for t in tasks[:5]:
        ray_get(actor.run.remote(t))
    t0 = time.perf_counter()
    for t in tasks:
        ray_get(actor.run.remote(t))
    out["ray_round_trip_ms_per_task"] = round(1000 * (time.perf_counter() - t0) / len(tasks), 2)
    t0 = time.perf_counter()
    for _ in ex.run(work, tasks):  # at its end it closes the actors and the Ray it started: not timed
        last = time.perf_counter()
    out["ray_executor_ms_per_task"] = round(1000 * (last - t0) / len(tasks), 2)
    out["load_after"] = round(os.getloadavg()[0], 2)
    return out


def ray_get(ref):
    import ray

    return ray.get(ref)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", type=Path, default=ROOT.parent / "shared" / "corpus")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "batch_executors_cpu.json")
    ap.add_argument("--only", choices=["patents", "contracts", "tiny", "overhead"], action="append")
    args = ap.parse_args()
    corpus = args.corpus if args.corpus.is_dir() else None
    rows = []
    with tempfile.TemporaryDirectory(prefix="longdoc-bench-exec-") as tmp:
        tmp = Path(tmp)
        sets = {"patents": (tmp / "patents", "patents"), "contracts": (tmp / "contracts", "contracts"),
                "tiny": (tmp / "tiny", "patents")}
        make_patents(sets["patents"][0], corpus)
        make_contracts(sets["contracts"][0])
        make_tiny(sets["tiny"][0])
        for name in args.only or ["patents", "contracts", "tiny", "overhead"]:
            if name == "overhead":
                row = overhead(sets["tiny"][0])
                rows.append(row)
                print(json.dumps(row), flush=True)
                continue
            folder, pipeline = sets[name]
            for executor in ("local", "ray"):
                for jobs in (1, 2):
                    row = run(folder, pipeline, tmp / f"out-{name}-{executor}-{jobs}", executor, jobs)
                    row["set"] = name
                    rows.append(row)
                    print(json.dumps(row), flush=True)
    result = {"machine": f"{platform.node()} {os.cpu_count()} cores, {platform.platform()}",
              "python": platform.python_version(), "rows": rows}
    try:
        import ray

        result["ray"] = ray.__version__
    except ImportError:
        pass
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
