"""Where does batched prefill time go? Time to the last first token of B prompts of T tokens
(`generate(max_tokens=1)`), repeated, with one chunk a step (the CPU default) and with the CUDA
default (16K tokens of prefill a step), on random-weight Gemma 3 270M; then a torch.profiler table
of one repetition with the default.

    python3 benchmarks/probe_batch_prefill.py [--batch 16] [--tokens 1024 32768] [--reps 3]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import bench_engine_gpu as beg  # noqa: E402

from engine.core.sampling import SamplingParams  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--tokens", type=int, nargs="+", default=[1024, 32768])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--tiny", action="store_true")
    ap.add_argument("--no-profile", action="store_true")
    a = ap.parse_args()
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    hf, eng, cfg = beg.build_pair(beg.hf_configs(a.tiny)["gemma"], dev)
    del hf
    gen = torch.Generator().manual_seed(0)
    one = SamplingParams(max_tokens=1, ignore_eos=True)
    b = a.batch
    for ti, t in enumerate(a.tokens):
        t = max(64, t // 128) if a.tiny else t
        chunk = min(t, max(2048, 32768 // b))
        budget = beg.kv_budget(cfg, t + 64, b, chunk)
        for name, step_tokens in (("one chunk a step", chunk + b), ("default", None)):
            llm = beg.engine_llm(eng, cfg, dev, t + 128, b, chunk, budget=budget, step_tokens=step_tokens)
            llm.generate([beg.rand_prompt(cfg.vocab_size, min(256, t), gen) for _ in range(b)], one)
            times = []
            for _ in range(a.reps):
                prompts = [beg.rand_prompt(cfg.vocab_size, t, gen) for _ in range(b)]
                t0 = beg.now()
                llm.generate(prompts, one)
                times.append(beg.now() - t0)
            steps = llm.sched_counters.steps
            print(f"B={b} T={t} chunk={chunk} {name:>16s}: " + ", ".join(f"{x:.3f}" for x in times)
                  + f" s  (scheduler steps so far {steps})", flush=True)
            if name == "default" and not a.no_profile and ti == 0:
                from torch.profiler import ProfilerActivity, profile

                acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if dev == "cuda" else [])
                prompts = [beg.rand_prompt(cfg.vocab_size, t, gen) for _ in range(b)]
                with profile(activities=acts) as prof:
                    t0 = time.perf_counter()
                    llm.generate(prompts, one)
                    beg.sync()
                print(f"profiled repetition: {time.perf_counter() - t0:.3f} s")
                sort = "self_cuda_time_total" if dev == "cuda" else "self_cpu_time_total"
                print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=14, max_name_column_width=48))
                print(prof.key_averages().table(sort_by=sort, row_limit=10, max_name_column_width=48))
            del llm


if __name__ == "__main__":
    main()
