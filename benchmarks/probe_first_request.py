"""Why the first request after `LLM.warmup()` is slow (issue 18): Gemma 3 270M (random weights, HF
folder, defaults), warmup, then prompts of several lengths timed one after another (TTFT,
max_tokens=1), the first under torch.profiler (top ops by CPU and by CUDA time), and new lengths
with cuDNN's SDPA switched off to see whether a per-shape cuDNN plan is what a new length pays.

    python3 benchmarks/probe_first_request.py [--model gemma|llama8b]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.bench_engine_gpu import hf_configs  # noqa: E402
from benchmarks.bench_user_path_gpu import now, prompt, save_folder  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="gemma")
    ap.add_argument("--tiny", action="store_true")
    args = ap.parse_args()
    from engine import LLM, SamplingParams

    dev = "cpu" if args.tiny else "cuda"
    cfg = hf_configs(args.tiny)[args.model]
    one = SamplingParams(max_tokens=1, ignore_eos=True)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / args.model
        save_folder(cfg, folder, dev)
        llm = LLM(model=folder, device=dev)
        t = time.perf_counter()
        llm.warmup()
        print(f"warmup {time.perf_counter() - t:.1f} s, chunk {llm.scheduler_config.max_prefill_chunk}", flush=True)
        lengths = [256, 512] if args.tiny else [8192, 8192, 4096, 8292, 16000, 16000]
        for k, n in enumerate(lengths):
            p = prompt(cfg.vocab_size, n, seed=100 + k)
            if k == 0:
                from torch.profiler import ProfilerActivity, profile

                acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if dev == "cuda" else [])
                with profile(activities=acts, record_shapes=False) as prof:
                    t = now()
                    llm.generate([p], one)
                    dt = now() - t
                print(f"len {n} (profiled): {dt:.3f} s", flush=True)
                print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=14), flush=True)
                if dev == "cuda":
                    print(prof.key_averages().table(sort_by="self_cuda_time_total", row_limit=10), flush=True)
                continue
            t = now()
            llm.generate([p], one)
            print(f"len {n}: {now() - t:.3f} s", flush=True)
        if dev == "cuda":
            torch.backends.cuda.enable_cudnn_sdp(False)
            for k, n in enumerate([12000, 12000, 9000]):
                p = prompt(cfg.vocab_size, n, seed=200 + k)
                t = now()
                llm.generate([p], one)
                print(f"len {n} (cuDNN SDPA off): {now() - t:.3f} s", flush=True)


if __name__ == "__main__":
    main()
