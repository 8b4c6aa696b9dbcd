"""Probe: decode attention at head_dim 256 (Gemma 3 270M: 4 query heads, 1 KV head), bf16 pages
against INT8 warm pages, graph-timed (longdoc_kernels/timing.py: what a captured decode step
runs, no host launch cost) over rotating copies of the cache (so that L2 does not hold it), over
the launch shape: context splits, key tile, warm key tile, warps, pipeline stages, INT8 loop mode
and conversion. Layouts: "tiered" as the cache lays blocks out (block 0 and the last 32 hot, the
rest INT8) and "allwarm". Prints each case's tuned launch (what `paged_decode` picks with no
launch arguments, the engine's path) and the sweep's best.

    python3 benchmarks/probe_decode_hd256.py [--ctx 32768] [--batches 1 16] [--budget 240] [--tuned-only --repeat 3]
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from longdoc_kernels import paged_attention as pa  # noqa: E402
from longdoc_kernels.kv_quant import quantize_blocks  # noqa: E402
from longdoc_kernels.timing import graph_time  # noqa: E402


def case(b: int, ctx: int, deadline: float, h: int = 4, kvh: int = 1, d: int = 256, sweep: bool = True) -> dict:
    dev, bs = "cuda", 16
    nb = ctx // bs
    rot = max(1, -(-256 * 2**20 // (2 * b * ctx * kvh * d * 2)))
    k = torch.randn(rot * b * nb, bs, kvh, d, device=dev, dtype=torch.bfloat16)
    v = torch.randn_like(k)
    tables = torch.randperm(rot * b * nb, device=dev, dtype=torch.int32).view(rot, b, nb)
    kq, ks = quantize_blocks(k)
    vq, vs = quantize_blocks(v)
    j = torch.arange(nb, device=dev)
    layouts = {"bf16": tables, "tiered": torch.where(((j > 0) & (j < nb - 32))[None, None, :], -tables - 2, tables),
               "allwarm": -tables - 2}
    lens = torch.full((b,), ctx, device=dev, dtype=torch.int32)
    q = torch.randn(b, h, d, device=dev, dtype=torch.bfloat16)
    kw8 = dict(k_cache_int8=kq, v_cache_int8=vq, k_scale=ks, v_scale=vs)
    common = dict(scale=d**-0.5, max_kv_len=ctx)

    def timed(layout: str, **kw) -> float:
        tabs = layouts[layout]
        extra = kw8 if layout != "bf16" else {}
        state = {"i": 0}

        def call() -> None:
            pa.paged_decode(q, k, v, tabs[state["i"] % rot], lens, **common, **extra, **kw)
            state["i"] += 1

        try:
            return graph_time(call, reps=max(8, 2 * rot), replays=5)
        except Exception as e:  # noqa: BLE001 - a launch shape this Triton cannot compile
            return f"failed: {type(e).__name__}: {str(e)[:80]}"

    res: dict[str, object] = {}
    for layout in ("bf16", "tiered", "allwarm"):
        res[f"{layout} tuned"] = timed(layout)
    key = [kk for kk in pa.DECODE_TUNED if kk[0] == b]
    print(f"  tuned choices: { {str(kk[5]): pa.DECODE_TUNED[kk] for kk in key} }", flush=True)
    grid = list(itertools.product((32, 64, 128, 256), (32, 64, 128), (4, 8), (1, 2, 3))) if sweep else []
    for layout in ("bf16", "tiered"):
        for splits, bn, warps, stages in grid:
            if time.time() > deadline:
                print(f"  (deadline: {layout} sweep cut)", flush=True)
                break
            name = f"{layout} s{splits} bn{bn} w{warps} st{stages}"
            if layout == "bf16":
                res[name] = timed(layout, num_splits=splits, block_n=bn, num_warps=warps, num_stages=stages)
            else:
                res[name] = timed(layout, num_splits=splits, block_n=64, block_n_warm=bn, int8_mode=4, num_warps=warps,
                                  num_stages=stages)
                if bn == 64 and stages in (2, 3) and warps == 4:
                    for conv in (1, 2):
                        res[f"{name} conv{conv}"] = timed(layout, num_splits=splits, block_n=64, block_n_warm=bn,
                                                          int8_mode=4, int8_conv=conv, num_warps=warps,
                                                          num_stages=stages)
                    res[f"{name} mode3"] = timed(layout, num_splits=splits, block_n=bn, int8_mode=3,
                                                 num_warps=warps, num_stages=stages)
    gb16, gb8 = 2 * b * ctx * kvh * d * 2 / 1e9, 2 * b * ctx * kvh * d / 1e9
    print(f"== b={b} ctx={ctx} head_dim {d} (rotating over {rot} copies)", flush=True)
    ok = {n: t for n, t in res.items() if isinstance(t, float)}
    for prefix in ("bf16", "tiered", "allwarm"):
        rows = sorted((t, n) for n, t in ok.items() if n.startswith(prefix))
        for t, n in rows[:8] if prefix != "allwarm" else rows:
            print(f"  {n:40s} {t * 1e6:7.1f} us  {(gb16 if prefix == 'bf16' else gb8) / t / 1e3:5.2f} TB/s", flush=True)
    fails = {n: t for n, t in res.items() if not isinstance(t, float)}
    print(f"  {len(fails)} launch shapes failed, e.g. {list(fails.items())[:3]}", flush=True)
    return {"b": b, "ctx": ctx, "results": {n: t for n, t in res.items()}}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ctx", type=int, default=32768)
    ap.add_argument("--batches", type=int, nargs="+", default=[1, 16])
    ap.add_argument("--budget", type=float, default=240.0, help="seconds for all the sweeps together")
    ap.add_argument("--json", default=None)
    ap.add_argument("--tuned-only", action="store_true", help="only the tuned launches (what the engine runs)")
    ap.add_argument("--repeat", type=int, default=1, help="time the tuned launches this many times")
    args = ap.parse_args()
    t0 = time.time()
    out = []
    for i, b in enumerate(args.batches):
        left = args.budget - (time.time() - t0)
        for _ in range(args.repeat):
            out.append(case(b, args.ctx, time.time() + left / (len(args.batches) - i), sweep=not args.tuned_only))
    if args.json:
        import json

        Path(args.json).write_text(json.dumps(out, indent=1))
    print(f"probe took {time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
