"""The engine as a new user meets it: a model saved as an HF folder, `LLM(model=folder,
device="cuda")` with default settings, timed through `generate` / `stream` only, then transformers
(sdpa) loading the same folder in the same process.

    python3 benchmarks/bench_user_path_gpu.py --out userpath.json [--models gemma,llama8b] [--tiny]

Models (random bf16 weights, real shapes: benchmarks/bench_engine_gpu.py's configs): Gemma 3 270M
and the Llama-3-8B shape. Per model: time to first token of one prompt of 8K and 32K tokens (and
128K for the 8B shape), each length three times (the first and a second request, different prompts,
then a "newlen" request 37 tokens shorter: shapes no earlier request had); the
decode time per token of one request at 32K, first and second request; the engine's load time
(including any warm-up it does at load) and transformers' TTFT on the same prompts. MFU: the
prefill's matmul and attention FLOPs over the TTFT against the H200's measured 770 TFLOP/s bf16
ceiling (BENCHMARKS.md). `--tiny` is a CPU smoke test of the script (toy shapes).
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.bench_engine_gpu import hf_configs, prefill_flops  # noqa: E402

PEAK_TFLOPS = 770.0  # bf16 matmul ceiling measured on the H200 (BENCHMARKS.md)


def now() -> float:
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    return time.perf_counter()


def prompt(vocab: int, n: int, seed: int) -> list[int]:
    return torch.randint(3, vocab, (n,), generator=torch.Generator().manual_seed(seed)).tolist()


def save_folder(hf_cfg, folder: Path, dev: str) -> None:
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    with torch.device(dev):
        hf = AutoModelForCausalLM.from_config(hf_cfg, dtype=torch.bfloat16)
    hf.save_pretrained(folder)
    del hf
    gc.collect()
    torch.cuda.empty_cache() if dev == "cuda" else None


def engine_runs(folder: Path, dev: str, lengths: list[int], decode_ctx: int, decode_steps: int, vocab: int,
                log, warmup: bool = False) -> dict:
    from engine import LLM, SamplingParams

    res: dict = {}
    t0 = time.perf_counter()
    llm = LLM(model=folder, device=dev)
    res["load_s"] = time.perf_counter() - t0
    log(f"  engine load {res['load_s']:.1f} s")
    if warmup:
        t0 = time.perf_counter()
        res["warmup_graphs"] = llm.warmup(lambda line: None)
        res["warmup_s"] = time.perf_counter() - t0
        log(f"  engine warmup(): {res['warmup_graphs']} decode graphs in {res['warmup_s']:.1f} s")
    one = SamplingParams(max_tokens=1, ignore_eos=True)
    for n in lengths:
        # a user's next document is rarely of the same length: "newlen" is a third request 37 tokens
        # shorter, whose shapes no earlier request had
        for rep in ("first", "second", "newlen"):
            m = n - 37 if rep == "newlen" else n
            p = prompt(vocab, m, seed=n + (rep == "second") + 2 * (rep == "newlen"))
            t = now()
            llm.generate([p], one)
            dt = now() - t
            res[f"ttft_{n}_{rep}_s"] = dt
            mfu = prefill_flops(llm.model, m) / dt / 1e12 / PEAK_TFLOPS
            res[f"mfu_{n}_{rep}"] = mfu
            log(f"  engine TTFT {m} ({rep} request): {dt:.3f} s, MFU {mfu:.0%}")
    params = SamplingParams(max_tokens=decode_steps + 1, ignore_eos=True)
    for rep in ("first", "second"):
        p = prompt(vocab, decode_ctx, seed=7 + (rep == "second"))
        stamps: list[float] = []
        for d in llm.stream([p], params):
            if d.token_ids:
                stamps.append(now())
        gaps = [b - a for a, b in zip(stamps[1:], stamps[2:], strict=False)]
        res[f"decode_{decode_ctx}_{rep}_step1_ms"] = (stamps[1] - stamps[0]) * 1e3  # the first decode step
        res[f"decode_{decode_ctx}_{rep}_ms"] = statistics.median(gaps) * 1e3
        res[f"decode_{decode_ctx}_{rep}_first8_ms"] = statistics.mean(gaps[:8]) * 1e3
        log(f"  engine decode b1 @{decode_ctx} ({rep} request): median {res[f'decode_{decode_ctx}_{rep}_ms']:.2f} ms, "
            f"first 8 steps {res[f'decode_{decode_ctx}_{rep}_first8_ms']:.2f} ms per token, "
            f"first decode step {res[f'decode_{decode_ctx}_{rep}_step1_ms']:.1f} ms")
    res["counters"] = llm.counters().to_dict()
    res["max_prefill_chunk"] = llm.scheduler_config.max_prefill_chunk
    del llm
    gc.collect()
    torch.cuda.empty_cache() if dev == "cuda" else None
    return res


def hf_runs(folder: Path, dev: str, lengths: list[int], vocab: int, log) -> dict:
    from transformers import AutoModelForCausalLM

    res: dict = {}
    hf = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.bfloat16, attn_implementation="sdpa").to(dev).eval()
    for n in lengths:
        for rep in ("first", "second"):
            ids = torch.tensor([prompt(vocab, n, seed=n + (rep == "second"))], device=dev)
            try:
                with torch.inference_mode():
                    t = now()
                    hf.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=1, do_sample=False,
                                pad_token_id=0)
                    dt = now() - t
                res[f"ttft_{n}_{rep}_s"] = dt
                log(f"  transformers TTFT {n} ({rep} request): {dt:.3f} s")
            except torch.OutOfMemoryError as exc:
                res[f"ttft_{n}_{rep}_s"] = None
                log(f"  transformers TTFT {n}: OOM {str(exc)[:100]}")
    del hf
    gc.collect()
    torch.cuda.empty_cache() if dev == "cuda" else None
    return res


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default="gemma,llama8b")
    ap.add_argument("--out", default="userpath.json")
    ap.add_argument("--tiny", action="store_true")
    ap.add_argument("--skip-hf", action="store_true")
    ap.add_argument("--warmup", action="store_true", help="call LLM.warmup() after the load (timed apart)")
    args = ap.parse_args()
    dev = "cuda" if torch.cuda.is_available() and not args.tiny else "cpu"
    cfgs = hf_configs(args.tiny)
    plan = {"gemma": ([8192, 32768], 32768), "llama8b": ([8192, 32768, 131072], 32768)}
    if args.tiny:
        plan = {"gemma": ([256, 1024], 1024), "llama8b": ([256, 1024], 1024)}
    out: dict = {"device": torch.cuda.get_device_name() if dev == "cuda" else "cpu",
                 "torch": torch.__version__, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "models": {}}

    def log(msg: str) -> None:
        print(msg, flush=True)

    for name in args.models.split(","):
        lengths, ctx = plan[name]
        cfg = cfgs[name]
        log(f"== {name}")
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp) / name
            t0 = time.perf_counter()
            save_folder(cfg, folder, dev)
            log(f"  saved HF folder in {time.perf_counter() - t0:.1f} s")
            entry = {"engine": engine_runs(folder, dev, lengths, ctx, 64 if not args.tiny else 8, cfg.vocab_size, log,
                                             args.warmup)}
            if not args.skip_hf:
                entry["transformers"] = hf_runs(folder, dev, lengths, cfg.vocab_size, log)
            out["models"][name] = entry
        Path(args.out).write_text(json.dumps(out, indent=2, default=str))
    Path(args.out).write_text(json.dumps(out, indent=2, default=str))


if __name__ == "__main__":
    main()
