"""Probe: INT8 decode (mode 4: the warm span's loop in tiles of block_n_warm, then the hot span's)
against bf16 pages, over the warm tile, splits, a register cap (maxnreg) and the float16
conversion, for the tiered layout (sinks + recent window hot, the rest warm), and an all-warm
layout run as the warm-only loop alone (INT8_MODE 1; valid only because every block is warm) as
the ceiling. Graph-timed over rotating copies (longdoc_kernels/timing.py). Run 1 of this probe (before
mode 4 took its present form) found the warm-only loop at block_n 128 as fast as bf16 pages at
b1 x 128K, at 64 25% slower, and the old mode 4 kernel (hot / warm / mixed loops) 50% slower.
(It replaces probe_int8_decode.py, in git history, which swept the loop modes 2 / 3 / old 4 and the
int8 conversions: 0.77-1.30 TB/s of INT8 bytes at b1 x 128K, conversions within noise.)

    python3 benchmarks/probe_int8_occupancy.py
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from longdoc_kernels import paged_attention as pa  # noqa: E402
from longdoc_kernels.kv_quant import quantize_blocks  # noqa: E402
from longdoc_kernels.timing import graph_time  # noqa: E402


def regs() -> dict:
    out = {}
    for dev_cache in getattr(pa._decode_split_kernel, "device_caches", {}).values():
        for key, kern in dev_cache[0].items():
            out[str(key)[-120:]] = (getattr(kern, "n_regs", None), getattr(kern, "n_spills", None))
    return out


def case(b: int, ctx: int, deadline: float) -> None:
    dev, bs, h, kvh, d = "cuda", 16, 32, 8, 128
    nb = ctx // bs
    rot = max(1, -(-256 * 2**20 // (2 * b * ctx * kvh * d)))
    k = torch.randn(rot * b * nb, bs, kvh, d, device=dev, dtype=torch.bfloat16)
    v = torch.randn_like(k)
    tables = torch.randperm(rot * b * nb, device=dev, dtype=torch.int32).view(rot, b, nb)
    kq, ks = quantize_blocks(k)
    vq, vs = quantize_blocks(v)
    j = torch.arange(nb, device=dev)
    tiered = torch.where(((j > 0) & (j < nb - 32))[None, None, :], -tables - 2, tables)
    allwarm = -tables - 2
    lens = torch.full((b,), ctx, device=dev, dtype=torch.int32)
    q = torch.randn(b, h, d, device=dev, dtype=torch.bfloat16)
    kw8 = dict(k_cache_int8=kq, v_cache_int8=vq, k_scale=ks, v_scale=vs)
    common = dict(scale=d**-0.5, max_kv_len=ctx)

    def timed(tabs, **kw) -> float:
        state = {"i": 0}

        def call() -> None:
            pa.paged_decode(q, k, v, tabs[state["i"] % rot], lens, **common, **kw)
            state["i"] += 1

        try:
            return graph_time(call, reps=max(8, 2 * rot), replays=5)
        except Exception as e:  # noqa: BLE001 - a variant this Triton cannot compile
            print(f"    failed: {kw.get('block_n')} {kw.get('int8_mode')} {kw.get('maxnreg')}: {str(e)[:100]}")
            return float("nan")

    res = {"bf16 tuned": timed(tables)}
    for splits in (32, 64, 128):
        res[f"bf16 s{splits}"] = timed(tables, num_splits=splits, block_n=64)
    res["int8 tuned"] = timed(tiered, **kw8)
    for bnw in (128, 64):
        for splits in (32, 64, 128, 256):
            if time.time() > deadline:
                break
            res[f"int8 tiered m4 bn64 bnw{bnw} s{splits}"] = timed(
                tiered, num_splits=splits, block_n=64, block_n_warm=bnw, int8_mode=4, **kw8)
            if bnw == 128 and splits in (64, 128):
                for maxnreg in (128, 168):
                    res[f"int8 tiered m4 bn64 bnw128 r{maxnreg} s{splits}"] = timed(
                        tiered, num_splits=splits, block_n=64, block_n_warm=128, int8_mode=4, maxnreg=maxnreg, **kw8)
                res[f"int8 tiered m4 bn64 bnw128 c1 s{splits}"] = timed(
                    tiered, num_splits=splits, block_n=64, block_n_warm=128, int8_mode=4, int8_conv=1, **kw8)
                res[f"int8 allwarm m1 bn128 s{splits}"] = timed(allwarm, num_splits=splits, block_n=128, int8_mode=1,
                                                               **kw8)
    ref, _ = pa.paged_decode(q, k, v, tables[0], lens, num_splits=32, block_n=64, **common)
    err = float((pa.paged_decode(q, k, v, tiered[0], lens, num_splits=32, block_n=64, block_n_warm=128, int8_mode=4,
                                 **common, **kw8)[0].float() - ref.float()).abs().max())
    gb16, gb8 = 2 * b * ctx * kvh * d * 2 / 1e9, 2 * b * ctx * kvh * d / 1e9
    print(f"== b={b} ctx={ctx} (rotating over {rot} copies); max |out(int8 m4 bnw128) - bf16 pages| {err:.2e}")
    for n, t in sorted(res.items(), key=lambda kv: (kv[0].split()[0], kv[1] if kv[1] == kv[1] else 1e9)):
        print(f"  {n:42s} {t * 1e6:7.1f} us  {(gb16 if n.startswith('bf16') else gb8) / t / 1e3:5.2f} TB/s")


def main() -> None:
    t0 = time.time()
    for b, ctx, budget in ((1, 131072, 40), (4, 131072, 30), (16, 32768, 30), (1, 32768, 20)):
        case(b, ctx, time.time() + budget)
    print("registers / spills per compiled variant:")
    for k_, v_ in regs().items():
        print("  ", v_, k_)
    print(f"probe took {time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
