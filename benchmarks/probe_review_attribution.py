"""Where the review path's time goes on a GPU: `LLMRun.ask_many` over G documents x Q questions
with the attribution pass, against the same without it, then one profiled group (cProfile, top
functions by cumulative and own time). With --steps: one `LLM.generate_shared_batch` of the group
(the review table's engine call) step by step instead, each engine step timed with a CUDA sync
around it and described (prefill tokens, decode sequences, whether a CUDA graph replayed).

    python3 benchmarks/probe_review_attribution.py [--steps [--per-chunk]] [--model llama8b] [--group 8] [--doc-tokens 8000] [--tiny]

Random bf16 weights in the model's real shape (benchmarks/bench_engine_gpu.py's configs), the
word-level tokenizer of bench_pipeline_batch_gpu.py; documents are sentences of 20 words, so the
attribution has about doc_tokens / 20 candidate sentences, as a real document would.
"""

from __future__ import annotations

import argparse
import collections
import cProfile
import pstats
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
    ap.add_argument("--steps", action="store_true", help="time the shared batch's engine steps instead")
    ap.add_argument("--per-chunk", action="store_true",
                    help="with --steps: first a group whose several-chunk prefill steps run chunk by chunk (the "
                         "backend's default prefill_many, as before the varlen launch), then the default")
    args = ap.parse_args()
    dev = "cuda" if torch.cuda.is_available() and not args.tiny else "cpu"
    if args.tiny:
        args.group, args.doc_tokens, args.max_tokens = 2, 600, 8
    from pipelines.documents import Document
    from pipelines.llm import INSTRUCTIONS, EngineSettings, LLMRun, get_engine

    cfg = hf_configs(args.tiny)[args.model]
    rng = random.Random(0)

    def doc(n: int) -> str:
        ws = words(rng, n, cfg.vocab_size).split()
        return " ".join(w + ("." if i % 20 == 19 else "") for i, w in enumerate(ws))

    def sync() -> None:
        if dev == "cuda":
            torch.cuda.synchronize()

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / args.model
        save_folder(cfg, folder, dev)
        llm = get_engine(EngineSettings(model=str(folder), device=dev))
        qs = [f"question {k} {words(rng, 12, cfg.vocab_size)}" for k in range(args.questions)]
        if args.steps:
            modes = ["per-chunk", "default"] if args.per_chunk else ["default"]
            heads = [INSTRUCTIONS + doc(args.doc_tokens) for _ in range((1 + len(modes)) * args.group)]
            shared_steps(llm, heads, qs, args, sync, modes)
            return
        run = LLMRun("off", engine=llm)

        def group() -> list:
            return [(Document.from_text(doc(args.doc_tokens), doc_id=f"d{k}"), qs) for k in range(args.group)]

        run.ask_many(group()[:2], max_tokens=args.max_tokens)  # warm-up
        for attribute in (False, True, True):
            jobs = group()
            sync()
            t = time.perf_counter()
            answers = run.ask_many(jobs, max_tokens=args.max_tokens, attribute=attribute)
            sync()
            dt = time.perf_counter() - t
            n = sum(len(a) for a in answers)
            print(f"attribute={attribute}: {args.group} documents x {args.questions} questions in {dt:.2f} s "
                  f"({n / dt:.2f} cells/s)", flush=True)
        jobs = group()
        pr = cProfile.Profile()
        pr.enable()
        run.ask_many(jobs, max_tokens=args.max_tokens)
        sync()
        pr.disable()
        st = pstats.Stats(pr)
        st.sort_stats("cumulative").print_stats(45)
        st.sort_stats("tottime").print_stats(25)


def shared_steps(llm, heads: list[str], questions: list[str], args, sync, modes: list[str]) -> None:
    """One warm-up shared batch over the first group of `heads`, then one per mode over the next
    groups with every engine step timed and described. Mode "per-chunk": the attention backend's
    several-chunk prefill runs chunk by chunk (`AttentionBackend.prefill_many`, the base class's)."""
    from engine import SamplingParams
    from engine.attention.backend import AttentionBackend
    from pipelines.llm import QUESTION, STOP

    suffixes = [QUESTION.format(question=q) for q in questions]
    params = SamplingParams(max_tokens=args.max_tokens, stop=list(STOP))
    g = len(heads) // (1 + len(modes))
    llm.generate_shared_batch([(h, suffixes) for h in heads[:g]], params)  # warm-up
    for k, mode in enumerate(modes):
        backend = llm.runner.backend
        if mode == "per-chunk":
            backend.prefill_many = AttentionBackend.prefill_many.__get__(backend)
        try:
            print(f"== {mode}")
            _timed_batch(llm, heads[(k + 1) * g : (k + 2) * g], suffixes, params, sync)
        finally:
            backend.__dict__.pop("prefill_many", None)


def _timed_batch(llm, heads: list[str], suffixes: list[str], params, sync) -> None:
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
    try:
        sync()
        t0 = time.perf_counter()
        llm.generate_shared_batch([(h, suffixes) for h in heads], params)
        sync()
        total = time.perf_counter() - t0
    finally:
        core.step, core.scheduler.schedule = real_step, real_sched
    kinds = collections.defaultdict(lambda: [0, 0.0])
    for r in rows:
        kind = ("prefill" if r["prefills"] and not r["decodes"] else "mixed" if r["prefills"] else
                "decode (graph)" if r.get("graph") else "decode (eager)")
        kinds[kind][0] += 1
        kinds[kind][1] += r.get("ms", 0.0)
    print(f"{len(heads)} documents x {len(suffixes)} questions: {total:.2f} s, {len(rows)} steps, "
          f"{sum(r.get('ms', 0) for r in rows) / 1e3:.2f} s inside steps")
    for kind, (n, ms) in kinds.items():
        print(f"  {kind}: {n} steps, {ms / 1e3:.3f} s, {ms / max(n, 1):.1f} ms a step")
    for r in rows[:12] + [{"...": ""}] + rows[-4:]:
        print("  ", r)


if __name__ == "__main__":
    main()
