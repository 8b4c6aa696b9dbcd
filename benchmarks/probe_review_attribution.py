"""Where the review path's time goes on a GPU: `LLMRun.ask_many` over G documents x Q questions
with the attribution pass, against the same without it, then one profiled group (cProfile, top
functions by cumulative and own time).

    python3 benchmarks/probe_review_attribution.py [--model llama8b] [--group 8] [--doc-tokens 8000] [--tiny]

Random bf16 weights in the model's real shape (benchmarks/bench_engine_gpu.py's configs), the
word-level tokenizer of bench_pipeline_batch_gpu.py; documents are sentences of 20 words, so the
attribution has about doc_tokens / 20 candidate sentences, as a real document would.
"""

from __future__ import annotations

import argparse
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
    args = ap.parse_args()
    dev = "cuda" if torch.cuda.is_available() and not args.tiny else "cpu"
    if args.tiny:
        args.group, args.doc_tokens, args.max_tokens = 2, 600, 8
    from pipelines.documents import Document
    from pipelines.llm import EngineSettings, LLMRun, get_engine

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


if __name__ == "__main__":
    main()
