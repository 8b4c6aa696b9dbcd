"""CPU decode: the torch backend's single-query attention as two matrix products
(`engine.attention.backend._one_query`, the default) against torch's fused SDPA, swapped in and out
of one loaded engine and interleaved (3 repetitions each): one sequence after a 1K and an 8K prompt
of contract text, and 3 sequences (a document's 3 questions) after 2K-token prompts. The packaged
Gemma 3 270M, int8 weights, one thread; median seconds per decode step.

    OMP_NUM_THREADS=1 python benchmarks/probe_cpu_decode_attention.py
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import engine.attention.backend as backend  # noqa: E402
from engine import LLM, SamplingParams, SchedulerConfig  # noqa: E402

TEXTS = ["en-commonpaper-csa-1.0-to-1.1/v1.txt", "en-commonpaper-dpa-1.0-to-1.1/v1.txt",
         "en-commonpaper-csa-1.0-to-1.1/v2.txt", "en-commonpaper-dpa-1.0-to-1.1/v2.txt"]


def sdpa(q, k, v, scale, mask=None):
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale, enable_gqa=k.shape[1] != q.shape[1])


def main() -> None:
    torch.set_num_threads(1)
    llm = LLM(device="cpu", scheduler=SchedulerConfig(max_model_len=9216))
    ids = llm.encode("\n\n".join((ROOT / "data/samples/contracts" / p).read_text(encoding="utf-8") for p in TEXTS))
    ways = {"sdpa": sdpa, "two matmuls": backend._one_query}
    res: dict = {}
    try:
        cases = {"1 x 1K": [ids[:1024]], "1 x 8K": [ids[:8192]],
                 "3 x 2K": [ids[:2048] + ids[9000 + 50 * k:9000 + 50 * k + 20] for k in range(3)]}
        for case, prompts in cases.items():
            list(llm.stream(prompts, SamplingParams(max_tokens=2, ignore_eos=True)))  # the prompts cached once
            for _ in range(3):
                for name, fn in ways.items():
                    backend._one_query = fn
                    stamps = [time.perf_counter() for _ in llm.stream(prompts, SamplingParams(max_tokens=17,
                                                                                              ignore_eos=True))]
                    # one stamp per token of each sequence, a step's tokens back to back: every n-th stamp
                    n = len(prompts)
                    steps = [b - a for a, b in zip(stamps[n::n], stamps[2 * n::n], strict=False)]
                    res.setdefault((case, name), []).append(statistics.median(steps))
    finally:
        backend._one_query = ways["two matmuls"]
    for (n, name), v in res.items():
        print(f"{n}, {name}: decode steps/s per repetition {[round(1 / x, 2) for x in v]}")


if __name__ == "__main__":
    main()
