"""Do the tier copier's copies (engine/kv/tier_copy.py) overlap compute on CUDA, and at what bandwidth?

    python benchmarks/bench_tier_copy_gpu.py [--mib 512] [--json out.json]
    python benchmarks/bench_tier_copy_gpu.py --tiny     # a smoke run of the code path, any device

A KV pool shaped like the engine's ([layers, blocks, block_size, kv_heads, head_dim], bf16) and a
gather of every other block (the swap-out of a preempted sequence, a warm-page save), --mib of
payload. Measured, each the median of --reps:
- copy alone: TierCopier.gather + synchronize (device -> pinned host), and scatter back (host ->
  device), as GB/s;
- compute alone: a chain of bf16 matmuls sized to take about as long as the gather;
- overlapped: the gather issued, then the compute chain on the compute stream at once, then both
  waited for;
- serial: the same gather done synchronously on the compute stream (`.cpu()`), then the compute;
- host return: how long `gather()` takes to return to Python (the caller goes on while bytes move).
overlap = (copy + compute - overlapped) / min(copy, compute): 1 when the shorter one is fully hidden,
0 when they run one after the other.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engine.kv.tier_copy import TierCopier  # noqa: E402


def sync(dev: torch.device) -> None:
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


def timed(fn, dev: torch.device, reps: int) -> float:
    out = []
    for _ in range(reps):
        sync(dev)
        t = time.perf_counter()
        fn()
        sync(dev)
        out.append(time.perf_counter() - t)
    return statistics.median(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mib", type=int, default=512, help="payload of one gather")
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--tiny", action="store_true", help="small sizes, any device (a smoke run)")
    ap.add_argument("--json", type=Path, default=None)
    a = ap.parse_args()
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if a.tiny:
        a.mib, a.reps = 4, 2
    layers, bs, kvh, hd = 18, 16, 1, 256  # Gemma 3 270M's pool shape (per-layer blocks of 16 tokens)
    dtype = torch.bfloat16
    block_bytes = layers * bs * kvh * hd * 2
    n_gather = max(1, a.mib * 2**20 // block_bytes)
    n_blocks = 2 * n_gather
    pool = torch.randn(layers, n_blocks, bs, kvh, hd, device=dev).to(dtype)
    ids = list(range(0, n_blocks, 2))
    payload = len(ids) * block_bytes
    c = TierCopier(dev)

    # warm-up (pinned allocations, cuBLAS handles)
    hosts = c.gather([pool], 1, ids)
    c.synchronize()
    c.scatter([pool], 1, ids, hosts)
    sync(dev)

    def gather_sync():
        c.gather([pool], 1, ids)
        c.synchronize()

    t_gather = timed(gather_sync, dev, a.reps)
    t_scatter = timed(lambda: c.scatter([pool], 1, ids, hosts), dev, a.reps)

    n = 2048 if a.tiny else 8192
    x = torch.randn(n, n, device=dev).to(dtype)
    y = torch.randn(n, n, device=dev).to(dtype)
    t_one = timed(lambda: x @ y, dev, 3)
    k = max(1, round(t_gather / t_one))

    def compute():
        z = x
        for _ in range(k):
            z = z @ y
        return z

    t_compute = timed(compute, dev, a.reps)

    def overlapped():
        c.gather([pool], 1, ids)
        compute()
        c.synchronize()

    t_over = timed(overlapped, dev, a.reps)

    idx = torch.tensor(ids, device=dev)

    def serial():
        pool.index_select(1, idx).cpu()
        compute()

    t_serial = timed(serial, dev, a.reps)

    rets = []
    for _ in range(a.reps):
        sync(dev)
        t = time.perf_counter()
        c.gather([pool], 1, ids)
        rets.append(time.perf_counter() - t)
        c.synchronize()
    t_return = statistics.median(rets)

    overlap = (t_gather + t_compute - t_over) / min(t_gather, t_compute)
    res = {
        "device": torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu",
        "torch": torch.__version__, "asynchronous": c.asynchronous,
        "payload_mib": payload / 2**20, "blocks": len(ids),
        "gather_s": t_gather, "gather_gb_s": payload / t_gather / 1e9,
        "scatter_s": t_scatter, "scatter_gb_s": payload / t_scatter / 1e9,
        "compute_s": t_compute, "matmuls": k,
        "overlapped_s": t_over, "serial_s": t_serial, "overlap": overlap,
        "gather_host_return_s": t_return,
    }
    for key, v in res.items():
        print(f"{key:>22}: {v:.4g}" if isinstance(v, float) else f"{key:>22}: {v}")
    if a.json:
        a.json.write_text(json.dumps(res, indent=2) + "\n")


if __name__ == "__main__":
    main()
