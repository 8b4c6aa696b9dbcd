"""Probe: the INT8 decode loop modes (2 per-tile branches, 3 branch-free, 4 tiered) against bf16
pages at fixed launch shapes and a few (num_warps, num_stages), each way of feeding int8 to the
tensor cores (int8_conv 0 cast, 1 float16 bit trick, 2 int8 dot), and what the launch tuner
picks. Timed as CUDA-graph replays (kernels/timing.py) over rotating copies of the cache.
A short GPU call for planning the next step.

    python3 tests/benchmarks/probe_int8_decode.py

Block layout as the cache places it: the first block (sinks) and the last 32 (the recent window)
hot, everything between warm.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from kernels import paged_attention as pa  # noqa: E402
from kernels.kv_quant import quantize_blocks  # noqa: E402
from kernels.timing import graph_time  # noqa: E402


def case(b: int, ctx: int, sweep: bool) -> None:
    dev, bs, h, kvh, d = "cuda", 16, 32, 8, 128
    nb = ctx // bs
    rot = max(1, -(-256 * 2**20 // (2 * b * ctx * kvh * d)))  # copies so INT8 pages exceed L2 together
    k = torch.randn(rot * b * nb, bs, kvh, d, device=dev, dtype=torch.bfloat16)
    v = torch.randn_like(k)
    tables = torch.randperm(rot * b * nb, device=dev, dtype=torch.int32).view(rot, b, nb)
    kq, ks = quantize_blocks(k)
    vq, vs = quantize_blocks(v)
    j = torch.arange(nb, device=dev)
    tiered = torch.where(((j > 0) & (j < nb - 32))[None, None, :], -tables - 2, tables)
    lens = torch.full((b,), ctx, device=dev, dtype=torch.int32)
    q = torch.randn(b, h, d, device=dev, dtype=torch.bfloat16)
    kw8 = dict(k_cache_int8=kq, v_cache_int8=vq, k_scale=ks, v_scale=vs)
    common = dict(scale=d**-0.5, max_kv_len=ctx)

    def timed(tabs, **kw) -> float:
        state = {"i": 0}

        def call() -> None:
            pa.paged_decode(q, k, v, tabs[state["i"] % rot], lens, **common, **kw)
            state["i"] += 1

        return graph_time(call, reps=max(8, 2 * rot), replays=5)

    res = {}
    for splits in (16, 32, 64, 128):
        res[f"bf16 s{splits}"] = timed(tables, num_splits=splits, block_n=64)
        for mode, conv in ((2, 0), (3, 0), (4, 0), (4, 1), (4, 2)):
            res[f"int8 m{mode} c{conv} s{splits}"] = timed(tiered, num_splits=splits, block_n=64, int8_mode=mode,
                                                        int8_conv=conv, **kw8)
    if sweep:
        for warps, stages in ((4, 2), (4, 4), (8, 2), (8, 3), (8, 4)):
            for splits in (32, 64, 128):
                res[f"bf16 s{splits} w{warps}/{stages}"] = timed(tables, num_splits=splits, block_n=64,
                                                                 num_warps=warps, num_stages=stages)
                for conv in (0, 1):
                    res[f"int8 m4 c{conv} s{splits} w{warps}/{stages}"] = timed(
                        tiered, num_splits=splits, block_n=64, int8_mode=4, int8_conv=conv, num_warps=warps,
                        num_stages=stages, **kw8)
    res["bf16 tuned"] = timed(tables)
    res["int8 tuned"] = timed(tiered, **kw8)
    # accuracy of each conversion against the bf16 pages (same inputs)
    ref, _ = pa.paged_decode(q, k, v, tables[0], lens, num_splits=32, block_n=64, **common)
    errs = {c: float((pa.paged_decode(q, k, v, tiered[0], lens, num_splits=32, block_n=64, int8_mode=4, int8_conv=c,
                                      **common, **kw8)[0].float() - ref.float()).abs().max()) for c in (0, 1, 2)}
    gb16, gb8 = 2 * b * ctx * kvh * d * 2 / 1e9, 2 * b * ctx * kvh * d / 1e9
    print(f"== b={b} ctx={ctx} (rotating over {rot} copies); max |out - bf16 pages| by conv: {errs}")
    for n, t in sorted(res.items(), key=lambda kv: (kv[0].split()[0], kv[1])):
        print(f"  {n:30s} {t * 1e6:7.1f} us  {(gb16 if n.startswith('bf16') else gb8) / t / 1e3:5.2f} TB/s")


def main() -> None:
    for b, ctx, sweep in ((1, 32768, True), (1, 131072, True), (4, 131072, False), (16, 32768, False)):
        case(b, ctx, sweep)
    print("tuned:", {str(k_): v_ for k_, v_ in pa.DECODE_TUNED.items()})


if __name__ == "__main__":
    main()
