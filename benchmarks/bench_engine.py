"""Benchmark: the engine against transformers' own Gemma3ForCausalLM on the CPU, same process, same
weights (the packaged Gemma 3 270M, dequantised once and shared), same dtype and thread count.

    python benchmarks/bench_engine.py [--dtype float32 bfloat16] [--prefill 2048] [--decode 64]
                                            [--reps 3] [--threads N] [--json out.json]

Prefill: time to the first token of a `--prefill`-token prompt (engine: generate with max_tokens=1,
i.e. chunked prefill over the paged cache, last-position logits, sampling; transformers: one forward
with logits_to_keep=1 filling its DynamicCache). Median of `--reps` runs.
Decode: greedy decoding after a 16-token prompt, 1 / median seconds per step over `--reps` x
`--decode` steps (engine: timestamps of the streamed tokens; transformers: its forward with its
DynamicCache, one token per call). Engine and transformers runs interleave, after a warm-up each.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def bench_dtype(dtype: str, n_prefill: int, n_decode: int, reps: int) -> dict:
    from engine import LLM, CacheConfig, SamplingParams

    llm = LLM(device="cpu", dtype=dtype, cache=CacheConfig(memory_budget=512 * 2**20), max_model_len=8192)
    from tests.engine.tiny_models import hf_gemma_from_engine

    hf = hf_gemma_from_engine(llm)
    text = (ROOT / "engine" / "__init__.py").read_text() + (ROOT / "engine" / "llm.py").read_text()
    long_ids = (llm.encode(text) * 4)[:n_prefill]
    short_ids = long_ids[:16]
    assert len(long_ids) == n_prefill
    one = SamplingParams(max_tokens=1)
    many = SamplingParams(max_tokens=1 + n_decode, ignore_eos=True)
    assert n_decode + 17 < 512, "decode stays inside the sliding window (transformers' cache quirk)"

    def eng_prefill() -> float:
        return timed(lambda: llm.generate([long_ids], one))

    def hf_prefill() -> float:
        with torch.inference_mode():
            return timed(lambda: hf(torch.tensor([long_ids]), logits_to_keep=1))

    def eng_decode() -> list[float]:
        """Seconds per decode step, from streaming timestamps (the first token is the prefill's)."""
        steps, t = [], time.perf_counter()
        for _ in llm.stream([short_ids], many):
            now = time.perf_counter()
            steps.append(now - t)
            t = now
        return steps[1:]

    def hf_decode() -> list[float]:
        """Seconds per decode step of transformers' model with its DynamicCache (what generate uses),
        called directly so that generate's own per-step overhead is not counted against it."""
        from transformers import DynamicCache

        steps = []
        with torch.inference_mode():
            cache = DynamicCache(config=hf.config)
            out = hf(torch.tensor([short_ids]), past_key_values=cache, use_cache=True, logits_to_keep=1)
            tok = out.logits[0, -1].argmax()
            for _ in range(n_decode):
                t = time.perf_counter()
                out = hf(tok.view(1, 1), past_key_values=cache, use_cache=True)
                tok = out.logits[0, -1].argmax()
                steps.append(time.perf_counter() - t)
        return steps

    # same greedy tokens: the comparison is between equal computations
    with torch.inference_mode():
        ref = hf.generate(torch.tensor([short_ids]), max_new_tokens=16, do_sample=False)[0, 16:].tolist()
    same = llm.generate([short_ids], SamplingParams(max_tokens=16))[0].token_ids == ref

    eng_prefill(), hf_prefill(), eng_decode(), hf_decode()  # warm-up
    rows: dict[str, list[float]] = {"engine_prefill_s": [], "hf_prefill_s": [], "engine_step_s": [], "hf_step_s": []}
    for _ in range(reps):
        rows["engine_prefill_s"].append(eng_prefill())
        rows["hf_prefill_s"].append(hf_prefill())
        rows["engine_step_s"] += eng_decode()
        rows["hf_step_s"] += hf_decode()
    out = {
        "engine_prefill_s": round(statistics.median(rows["engine_prefill_s"]), 3),
        "hf_prefill_s": round(statistics.median(rows["hf_prefill_s"]), 3),
        "engine_decode_tps": round(1 / statistics.median(rows["engine_step_s"]), 2),
        "hf_decode_tps": round(1 / statistics.median(rows["hf_step_s"]), 2),
        "prefill_runs_s": {k: [round(x, 2) for x in rows[k]] for k in ("engine_prefill_s", "hf_prefill_s")},
        "decode_steps_measured": len(rows["engine_step_s"]),
        "greedy_16_tokens_identical": same,
    }
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dtype", nargs="+", default=["float32", "bfloat16"])
    ap.add_argument("--prefill", type=int, default=2048)
    ap.add_argument("--decode", type=int, default=64)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    import transformers

    results = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "torch": torch.__version__, "transformers": transformers.__version__,
        "threads": torch.get_num_threads(), "machine": platform.processor() or platform.machine(),
        "prefill_tokens": args.prefill, "decode_tokens": args.decode, "dtypes": {},
    }
    for dt in args.dtype:
        results["dtypes"][dt] = bench_dtype(dt, args.prefill, args.decode, args.reps)
        print(dt, json.dumps(results["dtypes"][dt]), flush=True)
    print("\n| dtype | prefill 2K: engine | transformers | decode tok/s: engine | transformers |")
    print("|---|---|---|---|---|")
    for dt, r in results["dtypes"].items():
        print(f"| {dt} | {r['engine_prefill_s']:.2f} s | {r['hf_prefill_s']:.2f} s | "
              f"{r['engine_decode_tps']:.1f} | {r['hf_decode_tps']:.1f} |")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
