"""Probe: the CPU decode attention (longdoc_kernels/cpu decode_attention, one query row, Gemma 3
270M's global-layer shape: 4 query heads, 1 KV head of 256) over float32 pools against 16-bit
(half) pools holding the same values, at 1K, 8K and 32K keys, 1 and 2 threads. Three layers' pools
are read in turn, as a decode step reads Gemma's three global layers, so that at 32K the pages do
not sit in the last-level cache between calls. Medians of 30 calls each, the two dtypes alternated.

    python benchmarks/probe_cpu_kv16.py
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from longdoc_kernels import cpu  # noqa: E402


def main() -> None:
    k = cpu.available()
    if k is None or not cpu.kv_f16():
        raise SystemExit(f"the CPU kernels do not read half pools here ({cpu.status()})")
    print(f"kernels: {cpu.status()}", flush=True)
    for threads in (1, 2):
        torch.set_num_threads(threads)
        for n in (1024, 8192, 32768):
            bs = 16
            nb = n // bs + 1
            gen = torch.Generator().manual_seed(n)
            k32 = [torch.randn(nb, bs, 1, 256, generator=gen) for _ in range(3)]
            v32 = [torch.randn(nb, bs, 1, 256, generator=gen) for _ in range(3)]
            k16, v16 = [x.half() for x in k32], [x.half() for x in v32]
            k32, v32 = [x.float() for x in k16], [x.float() for x in v16]  # the same values in both
            tab = torch.randperm(nb, generator=gen)[None, :].to(torch.int64)  # blocks spread over the pool
            q = torch.randn(1, 4, 256, generator=gen)
            lens = torch.tensor([n])
            a = k.decode_attention(q, k32[0], v32[0], tab, lens, 0.0625)
            b = k.decode_attention(q, k16[0], v16[0], tab, lens, 0.0625)
            assert torch.equal(a, b), "half pools must give the float32 result of their values"
            t32, t16 = [], []
            for i in range(30):
                layer = i % 3
                t = time.perf_counter()
                k.decode_attention(q, k32[layer], v32[layer], tab, lens, 0.0625)
                t32.append(time.perf_counter() - t)
                t = time.perf_counter()
                k.decode_attention(q, k16[layer], v16[layer], tab, lens, 0.0625)
                t16.append(time.perf_counter() - t)
            m32, m16 = statistics.median(t32), statistics.median(t16)
            print(f"threads {threads}, {n:6d} keys: float32 pages {m32 * 1e3:6.3f} ms, half pages {m16 * 1e3:6.3f} ms "
                  f"({m32 / m16:.2f}x); bytes of K and V {2 * n * 256 * 4 / 2**20:.0f} / {2 * n * 256 * 2 / 2**20:.0f} MiB",
                  flush=True)


if __name__ == "__main__":
    main()
