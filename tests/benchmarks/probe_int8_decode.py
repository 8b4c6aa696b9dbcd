"""Probe: the two INT8 decode variants (per-tile branches / branch-free) against bf16 pages, at
fixed launch shapes, and what the launch tuner picks. A short GPU call for planning the next step.

    python3 tests/benchmarks/probe_int8_decode.py

Written 2026-12-03 when the session's device time had run out: not yet run on a GPU.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
import triton.testing

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from kernels import paged_attention as pa  # noqa: E402
from kernels.kv_quant import quantize_blocks  # noqa: E402


def case(b: int, ctx: int) -> None:
    dev, bs, h, kvh, d = "cuda", 16, 32, 8, 128
    nb = ctx // bs
    k = torch.randn(b * nb, bs, kvh, d, device=dev, dtype=torch.bfloat16)
    v = torch.randn_like(k)
    table = torch.randperm(b * nb, device=dev, dtype=torch.int32).view(b, nb)
    kq, ks = quantize_blocks(k)
    vq, vs = quantize_blocks(v)
    lens = torch.full((b,), ctx, device=dev, dtype=torch.int32)
    q = torch.randn(b, h, d, device=dev, dtype=torch.bfloat16)
    kw8 = dict(k_cache_int8=kq, v_cache_int8=vq, k_scale=ks, v_scale=vs)
    res = {}
    for splits in (16, 32, 64, 128):
        res[f"bf16 s{splits}"] = triton.testing.do_bench(
            lambda s=splits: pa.paged_decode(q, k, v, table, lens, scale=d**-0.5, max_kv_len=ctx, num_splits=s, block_n=64))
        for br in (True, False):
            res[f"int8 {'branch' if br else 'nobranch'} s{splits}"] = triton.testing.do_bench(
                lambda s=splits, br=br: pa.paged_decode(q, k, v, -table - 2, lens, scale=d**-0.5, max_kv_len=ctx,
                                                        num_splits=s, block_n=64, int8_branches=br, **kw8))
    pa.paged_decode(q, k, v, table, lens, scale=d**-0.5, max_kv_len=ctx)
    pa.paged_decode(q, k, v, -table - 2, lens, scale=d**-0.5, max_kv_len=ctx, **kw8)
    gb16, gb8 = 2 * b * ctx * kvh * d * 2 / 1e9, 2 * b * ctx * kvh * d / 1e9
    print(f"b={b} ctx={ctx}: " + ", ".join(
        f"{n} {t * 1e3:.0f}us ({(gb16 if n.startswith('bf16') else gb8) / t:.2f} TB/s)" for n, t in res.items()))


def main() -> None:
    for b, ctx in ((1, 32768), (1, 131072), (4, 131072)):
        case(b, ctx)
    print("tuned:", {str(k_): v_ for k_, v_ in pa.DECODE_TUNED.items()})


if __name__ == "__main__":
    main()
