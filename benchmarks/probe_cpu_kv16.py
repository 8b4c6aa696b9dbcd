"""Probe: the CPU decode attention (longdoc_kernels/cpu decode_attention, one query row, Gemma 3
270M's global-layer shape: 4 query heads, 1 KV head of 256) over float32 pools against 16-bit
(half) pools holding the same values, at 1K, 8K and 32K keys, 1 and 2 threads. Three layers' pools
are read in turn, as a decode step reads Gemma's three global layers, so that at 32K the pages do
not sit in the last-level cache between calls. Medians of 30 calls each, the two dtypes alternated.

    python benchmarks/probe_cpu_kv16.py

With --e2e: decode through the public API after an 8K and a 32K prompt (a window of the contract
text of bench_cpu_vs_llamacpp.py), int8 weights, speculative drafts off, two engines in this one
process, one with `CacheConfig(kv_dtype="float16")`, one with "float32": each prompt prefilled
once per engine, then `rounds` alternating requests of the same prompt (served from the prefix
cache: only its last block is computed again) decoding `steps` tokens each; tokens per second from
the first streamed token to the last, medians, and whether the two engines' tokens agree.

    python benchmarks/probe_cpu_kv16.py --e2e [--threads 2] [--rounds 5] [--steps 32]
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from longdoc_kernels import cpu  # noqa: E402


def e2e(threads: int, rounds: int, steps: int) -> None:
    from benchmarks.bench_cpu_vs_llamacpp import TEXTS
    from engine import LLM, CacheConfig, SamplingParams, SchedulerConfig

    torch.set_num_threads(threads)
    root = Path(__file__).resolve().parents[1]
    engines = {kv: LLM(device="cpu", cache=CacheConfig(memory_budget=2**30, kv_dtype=kv),
                       scheduler=SchedulerConfig(max_model_len=33280, num_speculative_tokens=0))
               for kv in ("float16", "float32")}
    tok = engines["float16"]
    ids = tok.encode("\n\n".join((root / p).read_text(encoding="utf-8") for p in TEXTS), add_special_tokens=False)
    head = tok.encode("")  # the model's BOS
    params = SamplingParams(max_tokens=1 + steps, ignore_eos=True)
    for n in (8192, 32768):
        prompt = head + ids[1000 : 1000 + n - len(head)]
        rates: dict[str, list[float]] = {kv: [] for kv in engines}
        tokens: dict[str, list[int]] = {}
        for kv, llm in engines.items():
            t = time.perf_counter()
            tokens[kv] = llm.generate([prompt], SamplingParams(max_tokens=1))[0].token_ids
            print(f"{n} keys, {kv} pages: prefill {time.perf_counter() - t:.1f} s", flush=True)
        for _ in range(rounds):
            for kv, llm in engines.items():
                stamps, out = [], []
                t = time.perf_counter()
                for o in llm.stream([prompt], params):
                    stamps.append(time.perf_counter() - t)
                    out += o.token_ids
                rates[kv].append((len(out) - 1) / (stamps[-1] - stamps[0]))
                tokens[kv] = out
        same = next((i for i, (a, b) in enumerate(zip(tokens["float16"], tokens["float32"], strict=False)) if a != b),
                    min(len(tokens["float16"]), len(tokens["float32"])))
        m16, m32 = statistics.median(rates["float16"]), statistics.median(rates["float32"])
        print(f"threads {threads}, after {n} tokens: decode {m16:.2f} tok/s with half pages, {m32:.2f} with float32 "
              f"({m16 / m32:.2f}x; rounds {[round(x, 1) for x in rates['float16']]} / "
              f"{[round(x, 1) for x in rates['float32']]}); tokens in common before the first difference: {same} of "
              f"{len(tokens['float16'])}", flush=True)


def main() -> None:
    import argparse

    ap = argparse.ArgumentParser()
    ap.add_argument("--e2e", action="store_true")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=32)
    args = ap.parse_args()
    if args.e2e:
        e2e(args.threads, args.rounds, args.steps)
        return
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
