"""Where a shared batch's time goes, step by step, on a GPU: 8 documents x 5 questions through
`LLM.generate_shared_batch` (the review table's engine call), each engine step timed with a CUDA
sync around it and described (prefill tokens, decode sequences, whether a CUDA graph replayed).

    python3 benchmarks/probe_shared_steps.py [--model llama8b] [--group 8] [--doc-tokens 8000] [--tiny]
"""

from __future__ import annotations

import argparse
import collections
import random
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.bench_engine_gpu import hf_configs  # noqa: E402
from benchmarks.bench_pipeline_batch_gpu import save_folder, words  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="llama8b")
    ap.add_argument("--group", type=int, default=8)
    ap.add_argument("--questions", type=int, default=5)
    ap.add_argument("--doc-tokens", type=int, default=8000)
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--tiny", action="store_true")
    args = ap.parse_args()
    dev = "cuda" if torch.cuda.is_available() and not args.tiny else "cpu"
    if args.tiny:
        args.group, args.doc_tokens, args.max_tokens = 2, 300, 4
    from engine import SamplingParams
    from pipelines.llm import INSTRUCTIONS, QUESTION, STOP, EngineSettings, get_engine

    cfg = hf_configs(args.tiny)[args.model]
    rng = random.Random(0)
    sync = torch.cuda.synchronize if dev == "cuda" else (lambda: None)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / args.model
        save_folder(cfg, folder, dev)
        llm = get_engine(EngineSettings(model=str(folder), device=dev))
        qs = [QUESTION.format(question=f"question {k} {words(rng, 12, cfg.vocab_size)}") for k in range(args.questions)]
        params = SamplingParams(max_tokens=args.max_tokens, stop=list(STOP))

        def groups():
            return [(INSTRUCTIONS + words(rng, args.doc_tokens, cfg.vocab_size), qs) for _ in range(args.group)]

        llm.generate_shared_batch(groups(), params)  # warm-up
        core, graphs = llm.core, llm.runner.graphs
        real_step, real_sched = core.step, core.scheduler.schedule
        rows: list[dict] = []

        def schedule():
            out = real_sched()
            rows.append({"prefill_tokens": sum(n for _, n in out.prefills), "prefills": len(out.prefills),
                         "decodes": len(out.decodes)})
            return out

        def step():
            replays = graphs.replays if graphs is not None else 0
            sync()
            t = time.perf_counter()
            res = real_step()
            sync()
            rows[-1]["ms"] = (time.perf_counter() - t) * 1e3
            rows[-1]["graph"] = (graphs.replays if graphs is not None else 0) > replays
            return res

        core.step, core.scheduler.schedule = step, schedule
        sync()
        t0 = time.perf_counter()
        llm.generate_shared_batch(groups(), params)
        sync()
        total = time.perf_counter() - t0
        core.step, core.scheduler.schedule = real_step, real_sched
        kinds = collections.defaultdict(lambda: [0, 0.0])
        for r in rows:
            kind = ("prefill" if r["prefills"] and not r["decodes"] else "mixed" if r["prefills"] else
                    "decode (graph)" if r.get("graph") else "decode (eager)")
            kinds[kind][0] += 1
            kinds[kind][1] += r.get("ms", 0.0)
        print(f"{args.group} documents x {args.questions} questions: {total:.2f} s, {len(rows)} steps, "
              f"{sum(r.get('ms', 0) for r in rows) / 1e3:.2f} s inside steps")
        for kind, (n, ms) in kinds.items():
            print(f"  {kind}: {n} steps, {ms / 1e3:.3f} s, {ms / max(n, 1):.1f} ms a step")
        for r in rows[:12] + [{"...": ""}] + rows[-4:]:
            print("  ", r)


if __name__ == "__main__":
    main()
