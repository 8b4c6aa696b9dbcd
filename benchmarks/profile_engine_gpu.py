"""Where the engine's time goes on a GPU, Gemma 3 270M shape with random weights (a diagnostic for
bench_engine_gpu.py; numbers go to BENCHMARKS.md only as explanations):

- the CUDA kernels of one 32K prefill (torch.profiler, top kernels by device time);
- the Python functions of end-to-end decode at batch 1 (cProfile over LLM.stream, top by own time);
- a captured decode graph's replay alone (device time per step, CUDA events), against the whole
  step (forward through the graph runner + logits + sampling).

    python3 benchmarks/profile_engine_gpu.py [--ctx 32768]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_engine_gpu import engine_llm, hf_configs, kv_budget, rand_prompt  # noqa: E402

from engine.core.sampling import SamplingParams  # noqa: E402
from engine.model.loader.random_weights import hf_to_engine_config, random_model  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ctx", type=int, default=32768)
    ap.add_argument("--tiny", action="store_true", help="toy shapes on the CPU (a smoke test of this script)")
    args = ap.parse_args()
    dev = "cpu" if args.tiny else "cuda"
    cfg = hf_to_engine_config(hf_configs(args.tiny)["gemma"])
    eng = random_model(cfg, dev, torch.bfloat16, seed=0)
    gen = torch.Generator().manual_seed(0)
    t = args.ctx

    # 1. prefill kernels
    llm = engine_llm(eng, cfg, dev, t + 128, 1, min(t, 32768), budget=kv_budget(cfg, t + 64, 1, 32768))
    one = SamplingParams(max_tokens=1, ignore_eos=True)
    llm.generate([rand_prompt(cfg.vocab_size, t, gen)], one)
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        t0 = time.perf_counter()
        llm.generate([rand_prompt(cfg.vocab_size, t, gen)], one)
        if dev == "cuda":
            torch.cuda.synchronize()
        wall = time.perf_counter() - t0
    print(f"== prefill {t}: wall {wall * 1e3:.1f} ms (under the profiler)")
    print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=18, max_name_column_width=70))

    # 2. end-to-end decode at batch 1, Python profile
    params = SamplingParams(max_tokens=40, ignore_eos=True)
    prompt = rand_prompt(cfg.vocab_size, t, gen)
    pr = cProfile.Profile()
    n = 0
    t0 = None
    for _d in llm.stream([prompt], params):
        n += 1
        if n == 8:
            t0 = time.perf_counter()
            pr.enable()
    pr.disable()
    wall = time.perf_counter() - t0
    print(f"== e2e decode b=1 @{t}: {(n - 8)} steps, {wall / max(n - 8, 1) * 1e3:.2f} ms/step (under cProfile)")
    s = io.StringIO()
    pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(22)
    print(s.getvalue())

    # 3. the graph replay alone
    graphs = llm.runner.graphs
    if graphs is not None and dev == "cuda":
        for key, g in graphs.graphs.items():
            for _ in range(5):
                g.graph.replay()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(50):
                g.graph.replay()
            end.record()
            end.synchronize()
            print(f"== graph {key} (batch bucket, context bucket): replay alone {start.elapsed_time(end) / 50:.3f} ms")
    print(f"graph replays {graphs.replays if graphs else 0}, captures {graphs.captures if graphs else 0}, "
          f"off: {graphs.disabled if graphs else 'no runner'}")


if __name__ == "__main__":
    main()
