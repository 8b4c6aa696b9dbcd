"""Where one long prefill's GPU time goes, the engine with its defaults against transformers (sdpa)
on the same random bf16 weights, in one process: torch.profiler's kernels of one request each,
grouped (attention, GEMM, elementwise and copies, other), and the wall time against the GPU's busy
time (what the host adds). A diagnostic for BENCHMARKS.md's user-path figures.

    python3 benchmarks/profile_prefill_gpu.py --model llama8b --ctx 32768
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import defaultdict
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_engine_gpu import build_pair, hf_configs, rand_prompt  # noqa: E402

from engine.attention.triton_backend import default_backend  # noqa: E402
from engine.core.sampling import SamplingParams  # noqa: E402
from engine.model.loader.random_weights import llm_from_model  # noqa: E402


def group(name: str) -> str:
    n = name.lower()
    if "flash" in n or "fmha" in n or "attention" in n or "prefill" in n or "_fwd_kernel" in n:
        return "attention"
    if "gemm" in n or "cutlass" in n or "sm90_xmma" in n or "nvjet" in n or "matmul" in n:
        return "gemm"
    if "copy" in n or "cat" in n or "index" in n or "gather" in n or "scatter" in n:
        return "copies"
    if "elementwise" in n or "reduce" in n or "norm" in n or "rope" in n or "silu" in n or "mul" in n:
        return "elementwise"
    return "other"


def profiled(fn, label: str, top: int) -> None:
    from torch.profiler import ProfilerActivity, profile

    fn()  # first call: compiles, plans
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    plain = time.perf_counter() - t0
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    kernels = defaultdict(float)
    counts = defaultdict(int)
    for ev in prof.key_averages():
        t = ev.device_time_total if hasattr(ev, "device_time_total") else ev.cuda_time_total
        if t > 0 and ev.device_type == torch.autograd.DeviceType.CUDA:
            kernels[ev.key] += t / 1e3
            counts[ev.key] += ev.count
    busy = sum(kernels.values())
    groups = defaultdict(float)
    for k, t in kernels.items():
        groups[group(k)] += t
    print(f"== {label}: wall {plain * 1e3:.1f} ms (unprofiled), GPU busy {busy:.1f} ms (profiled run), "
          f"host gap {plain * 1e3 - busy:.1f} ms")
    print("   by group: " + ", ".join(f"{g} {t:.1f} ms" for g, t in sorted(groups.items(), key=lambda x: -x[1])))
    for k, t in sorted(kernels.items(), key=lambda x: -x[1])[:top]:
        print(f"   {t:9.2f} ms  {counts[k]:6d}x  [{group(k)}] {k[:110]}")


SYNCS = ("cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize", "cudaMemcpy", "cudaMalloc",
         "cudaFree", "aten::_local_scalar_dense", "aten::nonzero", "aten::item")


def host_side(fn, label: str) -> None:
    """What the host does in one request: its top ops by own CPU time, and the calls that wait for
    the GPU or allocate (with the Python lines they came from)."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], with_stack=True) as prof:
        fn()
        torch.cuda.synchronize()
    avg = prof.key_averages()
    print(f"== {label}: host, top ops by own CPU time")
    for ev in sorted(avg, key=lambda e: -e.self_cpu_time_total)[:12]:
        print(f"   {ev.self_cpu_time_total / 1e3:9.2f} ms  {ev.count:6d}x  {ev.key[:90]}")
    print(f"== {label}: waits and allocations (own CPU time, calls, where from)")
    for ev in sorted(prof.key_averages(group_by_stack_n=6), key=lambda e: -e.self_cpu_time_total):
        if any(ev.key.startswith(k) for k in SYNCS) and ev.self_cpu_time_total > 200:
            where = " <- ".join(f for f in ev.stack if "/engine/" in f or "/longdoc_kernels/" in f)[:300]
            print(f"   {ev.self_cpu_time_total / 1e3:9.2f} ms  {ev.count:5d}x  {ev.key[:40]}  {where}")


def python_side(fn, label: str, top: int = 25) -> None:
    """cProfile of one request: the Python functions by own time (the host's share of a request
    whose GPU work is shorter than its wall time)."""
    import cProfile
    import io
    import pstats

    pr = cProfile.Profile()
    pr.enable()
    fn()
    torch.cuda.synchronize()
    pr.disable()
    s = io.StringIO()
    pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(top)
    print(f"== {label}: Python, by own time")
    print("\n".join(line for line in s.getvalue().splitlines() if line.strip())[:6000])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="llama8b")
    ap.add_argument("--ctx", type=int, default=32768)
    ap.add_argument("--top", type=int, default=14)
    ap.add_argument("--skip-hf", action="store_true")
    args = ap.parse_args()
    hf_cfg = hf_configs(False)[args.model]
    hf, eng, cfg = build_pair(hf_cfg, "cuda")
    gen = torch.Generator().manual_seed(0)
    # the engine as a user gets it: default cache, scheduler and backend (only the model is handed in)
    llm = llm_from_model(eng, cfg, device="cuda", dtype=torch.bfloat16, backend=default_backend(torch.device("cuda")))
    print(f"engine prefill chunk {llm.core.chunk}, KV pool {llm.kv.bytes / 2**30:.1f} GiB")
    one = SamplingParams(max_tokens=1, ignore_eos=True)
    profiled(lambda: llm.generate([rand_prompt(cfg.vocab_size, args.ctx, gen)], one), f"engine {args.model} {args.ctx}",
             args.top)
    host_side(lambda: llm.generate([rand_prompt(cfg.vocab_size, args.ctx, gen)], one), f"engine {args.model} {args.ctx}")
    python_side(lambda: llm.generate([rand_prompt(cfg.vocab_size, args.ctx, gen)], one), f"engine {args.model} {args.ctx}")
    llm = None  # frees the pool before transformers runs
    torch.cuda.empty_cache()
    if not args.skip_hf:
        def hf_run():
            ids = torch.randint(3, cfg.vocab_size, (1, args.ctx), generator=gen).to("cuda")
            with torch.no_grad():
                hf.generate(ids, max_new_tokens=1, do_sample=False)

        profiled(hf_run, f"transformers sdpa {args.model} {args.ctx}", args.top)


if __name__ == "__main__":
    main()
