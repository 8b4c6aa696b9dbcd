"""Benchmark (issue 18, CPU): longdoc (int8 weights, the CPU default, and float32) against llama.cpp
and transformers on the CPU, same Gemma 3 270M GGUF, same token ids, same thread counts, in one run.

    python benchmarks/bench_cpu_vs_llamacpp.py [--threads 1 2] [--reps 2] [--steps 16]
        [--llama-python PYTHON] [--json benchmarks/results/cpu_vs_llamacpp.json]

Measured, per thread count and repetition, interleaved (every engine once, then the next thread
count, then the next repetition), each engine in its own worker process that keeps its model loaded:
- prefill 2K: a 2,048-token prompt, time to the first token (longdoc: `generate` with max_tokens=1
  through the public API, default chunking; llama.cpp: `Llama.eval` of the prompt, n_batch 512;
  transformers: one forward with logits_to_keep=1 filling its DynamicCache);
- decode 1K: greedy tokens after a 1,024-token prompt, tokens per second from the first streamed
  token to the last (longdoc: timestamps of streamed tokens, with its defaults: prompt-lookup
  speculative decoding on, engine/core/speculative.py, several tokens may arrive at once;
  `longdoc-int8-nospec` turns it off, and the run checks both give the same tokens; llama.cpp:
  `eval` of one token and argmax of its logits, no speculation; transformers: its forward with the
  cache, one token per call);
- 8K: an 8,192-token prompt, its prefill time and the decode after it; 32K the same at 32,768.
Each (repetition, threads, case) gets a prompt of its own, the same for every engine (a different
window of the same contract text), so no engine reuses a cached prefix (longdoc's prefix cache,
llama.cpp's prompt cache). The decode continues contract text, which repeats its own phrases: the
speculative figures depend on the text (BENCHMARKS.md). The load average of the machine is
recorded around every call (the cores are shared): medians over repetitions.

transformers runs `Gemma3ForCausalLM` (sdpa attention, float32) built from the same GGUF's
dequantised weights (tests/engine/tiny_models.hf_gemma_from_engine), not from an HF download.

llama.cpp is a baseline, not a dependency of the project: llama-cpp-python is built from its PyPI
source package into a scratch venv outside the repository (about 15 minutes on 2 cores, one build
job), and its worker runs under that venv's python (`--llama-python`):

    python3 -m venv /tmp/llamavenv
    CMAKE_BUILD_PARALLEL_LEVEL=1 /tmp/llamavenv/bin/pip install llama-cpp-python   # 0.3.36 here

On the Intel Xeon with AMX of 2026-12-05 the native build (GGML_NATIVE, AMX kernels) crashed with a
segmentation fault at the first `eval`; built without AMX it runs (AVX-512, VNNI and BF16 kept):

    CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON \
      -DGGML_AVX512=ON -DGGML_AVX512_VNNI=ON -DGGML_AVX512_BF16=ON -DGGML_AMX_TILE=OFF \
      -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF" CMAKE_BUILD_PARALLEL_LEVEL=1 \
      /tmp/llamavenv2/bin/pip install --no-cache-dir llama-cpp-python==0.3.36

The llama.cpp worker imports only llama_cpp and numpy (token ids come from the main process).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TEXTS = [
    "data/samples/contracts/en-commonpaper-csa-1.0-to-1.1/v1.txt",
    "data/samples/contracts/en-commonpaper-dpa-1.0-to-1.1/v1.txt",
    "data/samples/contracts/en-github-tos-2017-10-to-2018-05/v1.txt",
    "data/samples/contracts/en-commonpaper-csa-1.0-to-1.1/v2.txt",
    "data/samples/contracts/en-commonpaper-dpa-1.0-to-1.1/v2.txt",
    "data/samples/contracts/en-github-tos-2017-10-to-2018-05/v2.txt",  # (with it the text has room for 32K)
]


MAX_LEN = 33280  # the longest case (32K) and its decode steps

# longdoc's engine names -> worker_longdoc's weights argument
LONGDOC_ENGINES = {"longdoc-int8": "int8", "longdoc-float32": "float", "longdoc-int8-full-head": "int8-full-head",
                   "longdoc-int8-nospec": "int8-nospec", "longdoc-int8-int4-filter": "int8-int4-filter",
                   "longdoc-int8-int8-filter": "int8-int8-filter", "longdoc-int8-nokernels": "int8-nokernels",
                   "longdoc-int8-nospec-nokernels": "int8-nospec-nokernels", "longdoc-int8-kv16": "int8-kv16",
                   "longdoc-int8-nospec-kv16": "int8-nospec-kv16", "longdoc-int8-kv32": "int8-kv32",
                   "longdoc-int8-nospec-kv32": "int8-nospec-kv32"}


# ----------------------------------------------------------------------------------------- workers
def worker_longdoc(weights: str) -> None:
    """weights: "int8", "float", "int8-full-head": int8 with the output layer's GreedyHead
    switched off by hand (every logit computed, as before it), "int8-nospec": int8 with
    prompt-lookup speculative decoding off (`num_speculative_tokens=0`), or "int8-int4-filter" /
    "int8-int8-filter": the GreedyHead's filter named (LONGDOC_GREEDY_FILTER), or "int8-nokernels" /
    "int8-nospec-nokernels": the C kernels off (LONGDOC_CPU_KERNELS=0), or "int8-kv16" /
    "int8-nospec-kv16" / "int8-kv32" / "int8-nospec-kv32": K/V pages of 16 or 32 bits named
    (`CacheConfig(kv_dtype="float16" / "float32")`), whatever the default, for the comparisons."""
    sys.path.insert(0, str(ROOT))
    full_head = weights == "int8-full-head"
    nospec = weights in ("int8-nospec", "int8-nospec-nokernels", "int8-nospec-kv16", "int8-nospec-kv32")
    kv_dtype = {"kv16": "float16", "kv32": "float32"}.get(weights[-4:])
    if weights in ("int8-int4-filter", "int8-int8-filter"):
        os.environ["LONGDOC_GREEDY_FILTER"] = weights.split("-")[1]
    if weights.endswith("nokernels"):  # torch's paths, not the C kernels (longdoc_kernels/cpu)
        os.environ["LONGDOC_CPU_KERNELS"] = "0"
    weights = "int8" if weights != "float" else weights
    import torch

    from engine import SamplingParams
    from engine.config import CacheConfig, EngineConfig, LoadConfig, SchedulerConfig
    from engine.llm import LLM
    from longdoc_kernels import cpu as cpu_kernels

    t = time.perf_counter()
    llm = LLM(config=EngineConfig(LoadConfig(device="cpu", weights=weights),
                                  CacheConfig(memory_budget=2**30, kv_dtype=kv_dtype),
                                  SchedulerConfig(max_model_len=MAX_LEN, num_speculative_tokens=0 if nospec else None)))
    if full_head:
        llm.model.greedy_head = None
    reply({"ready": True, "load_s": time.perf_counter() - t, "weights": llm.weights,
           "greedy_head": llm.model.greedy_head.filter if llm.model.greedy_head is not None else None,
           "speculative": llm.core.proposer.k if llm.core.proposer is not None else 0, "kv_dtype": str(llm.kv.dtype),
           "cpu_kernels": cpu_kernels.status()})
    for req in requests():
        torch.set_num_threads(req["threads"])
        stamps, toks, t = [], [], time.perf_counter()
        p = SamplingParams(max_tokens=1 + req["steps"], ignore_eos=True)
        for out in llm.stream([req["ids"]], p):
            stamps.append(time.perf_counter() - t)
            toks += out.token_ids
        reply(result(stamps, toks))


def worker_hf() -> None:
    sys.path.insert(0, str(ROOT))
    import torch
    from transformers import DynamicCache

    from engine.config import CacheConfig, EngineConfig, LoadConfig, SchedulerConfig
    from engine.llm import LLM
    from tests.engine.tiny_models import hf_gemma_from_engine

    t = time.perf_counter()
    llm = LLM(config=EngineConfig(LoadConfig(device="cpu", weights="float"), CacheConfig(memory_budget=2**26),
                                  SchedulerConfig(max_model_len=9216)))
    hf = hf_gemma_from_engine(llm)
    del llm
    reply({"ready": True, "load_s": time.perf_counter() - t, "attn": hf.config._attn_implementation})
    for req in requests():
        torch.set_num_threads(req["threads"])
        stamps, t = [], time.perf_counter()
        with torch.inference_mode():
            cache = DynamicCache(config=hf.config)
            out = hf(torch.tensor([req["ids"]]), past_key_values=cache, use_cache=True, logits_to_keep=1)
            tok = out.logits[0, -1].argmax()
            stamps.append(time.perf_counter() - t)
            for _ in range(req["steps"]):
                out = hf(tok.view(1, 1), past_key_values=cache, use_cache=True)
                tok = out.logits[0, -1].argmax()
                stamps.append(time.perf_counter() - t)
        reply(result(stamps))


def worker_llama(model_path: str, threads: list[int]) -> None:
    import numpy as np
    from llama_cpp import Llama

    t = time.perf_counter()
    llms = {n: Llama(model_path=model_path, n_ctx=MAX_LEN, n_batch=512, n_threads=n, n_threads_batch=n, verbose=False)
            for n in threads}
    reply({"ready": True, "load_s": time.perf_counter() - t})
    for req in requests():
        llm = llms[req["threads"]]
        llm.reset()
        n_vocab = llm.n_vocab()
        stamps, t = [], time.perf_counter()
        llm.eval(req["ids"])
        tok = int(np.ctypeslib.as_array(llm._ctx.get_logits(), shape=(n_vocab,)).argmax())
        stamps.append(time.perf_counter() - t)
        for _ in range(req["steps"]):
            llm.eval([tok])
            tok = int(np.ctypeslib.as_array(llm._ctx.get_logits(), shape=(n_vocab,)).argmax())
            stamps.append(time.perf_counter() - t)
        reply(result(stamps))


def result(stamps: list[float], toks: list[int] | None = None) -> dict:
    """prefill_s: time to the first token; decode_tok_s: the tokens after it over the time they took
    (with speculative decoding several tokens arrive together, so not a median step);
    step_s: the median gap between tokens."""
    steps = [b - a for a, b in zip(stamps, stamps[1:], strict=False)]
    span = stamps[-1] - stamps[0] if len(stamps) > 1 else 0.0
    out = {"prefill_s": stamps[0], "step_s": statistics.median(steps) if steps else None, "steps": len(steps),
           "decode_tok_s": len(steps) / span if span > 0 else None}
    if toks is not None:
        out["tokens_out"] = toks
    return out


def requests():
    for line in sys.stdin:
        if line.strip():
            yield json.loads(line)


def reply(obj: dict) -> None:
    sys.stdout.write("@@" + json.dumps(obj) + "\n")
    sys.stdout.flush()


# ----------------------------------------------------------------------------------------- driver
class Worker:
    def __init__(self, name: str, argv: list[str]) -> None:
        self.name = name
        self.p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=ROOT)
        self.info = self.read()
        print(f"{name}: ready {self.info}", flush=True)

    def read(self) -> dict:
        for line in self.p.stdout:
            if line.startswith("@@"):
                return json.loads(line[2:])
        raise RuntimeError(f"{self.name}: worker exited ({self.p.wait()})")

    def call(self, req: dict) -> dict:
        self.p.stdin.write(json.dumps(req) + "\n")
        self.p.stdin.flush()
        return self.read()

    def close(self) -> None:
        self.p.stdin.close()
        self.p.wait()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--steps", type=int, default=16, help="decode steps timed after each prompt")
    ap.add_argument("--engines", nargs="+", default=["longdoc-int8", "longdoc-float32", "llama.cpp", "transformers"])
    ap.add_argument("--cases", nargs="+", default=["2K", "1K", "8K"])
    ap.add_argument("--llama-python", default="/tmp/llamavenv/bin/python")
    ap.add_argument("--json", default="benchmarks/results/cpu_vs_llamacpp.json")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        kind, _, arg = args.worker.partition(":")
        if kind == "longdoc":
            worker_longdoc(arg)
        elif kind == "hf":
            worker_hf()
        else:
            worker_llama(arg, args.threads)
        return

    sys.path.insert(0, str(ROOT))
    from engine.model.loader.gguf_file import read_gguf
    from engine.model.loader.gguf_model import gguf_tokenizer
    from engine.paths import default_model_path

    gguf = str(default_model_path())
    tok = gguf_tokenizer(read_gguf(gguf))
    text = "\n\n".join((ROOT / p).read_text(encoding="utf-8") for p in TEXTS)
    ids = tok.encode(text, add_special_tokens=False)
    bos = read_gguf(gguf).get("tokenizer.ggml.bos_token_id")
    print(f"text: {len(ids)} tokens; machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores",
          flush=True)
    me = [sys.executable, str(Path(__file__).resolve())]
    thr = ["--threads", *map(str, args.threads)]
    spawn = {
        **{name: (lambda name=name, mode=mode: Worker(name, [*me, "--worker", f"longdoc:{mode}"]))
           for name, mode in LONGDOC_ENGINES.items()},
        "llama.cpp": lambda: Worker("llama.cpp", [args.llama_python, str(Path(__file__).resolve()),
                                                  "--worker", f"llama:{gguf}", *thr]),
        "transformers": lambda: Worker("transformers", [*me, "--worker", "hf"]),
    }
    workers = {name: spawn[name]() for name in args.engines}
    cases = [c for c in [("2K", 2048, 0), ("1K", 1024, args.steps), ("8K", 8192, args.steps),
                         ("32K", 32768, args.steps)] if c[0] in args.cases]
    if any(n >= len(ids) for _, n, _ in cases):
        raise SystemExit(f"the text has {len(ids)} tokens: too few for a case of {max(n for _, n, _ in cases)}")
    rows: list[dict] = []
    call = 0
    for rep in range(args.reps):
        for threads in args.threads:
            for case, n, steps in cases:
                call += 1
                # a window of the text of its own per (rep, threads, case), the same for every engine:
                # no prefix reuse within an engine, and engines compared on the same prompt
                start = (call * 1499) % (len(ids) - n)
                prompt = [bos, *ids[start:start + n - 1]]
                for name, w in workers.items():
                    load0 = os.getloadavg()[0]
                    r = w.call({"ids": prompt, "threads": threads, "steps": steps})
                    row = {"engine": name, "threads": threads, "case": case, "rep": rep, "tokens": n,
                           "load_before": load0, "load_after": os.getloadavg()[0], **r}
                    rows.append(row)
                    print(json.dumps(row), flush=True)
    for w in workers.values():
        w.close()

    def med(engine: str, threads: int, case: str, key: str) -> float | None:
        xs = [r[key] for r in rows if (r["engine"], r["threads"], r["case"]) == (engine, threads, case)
              and r[key] is not None]
        return statistics.median(xs) if xs else None

    summary = []
    for threads in args.threads:
        for name in workers:
            p2, p8 = med(name, threads, "2K", "prefill_s"), med(name, threads, "8K", "prefill_s")
            d1, d8 = med(name, threads, "1K", "decode_tok_s"), med(name, threads, "8K", "decode_tok_s")
            p32, d32 = med(name, threads, "32K", "prefill_s"), med(name, threads, "32K", "decode_tok_s")
            summary.append({
                "threads": threads, "engine": name,
                "prefill_2k_tps": round(2048 / p2, 1) if p2 else None,
                "prefill_8k_tps": round(8192 / p8, 1) if p8 else None,
                "decode_1k_tps": round(d1, 2) if d1 else None,
                "decode_8k_tps": round(d8, 2) if d8 else None,
                "prefill_32k_tps": round(32768 / p32, 1) if p32 else None,
                "decode_32k_tps": round(d32, 2) if d32 else None,
            })
    print("\n| threads | engine | prefill 2K tok/s | prefill 8K tok/s | decode @1K tok/s | decode @8K tok/s | "
          "prefill 32K tok/s | decode @32K tok/s |")
    print("|---|---|---|---|---|---|---|---|")
    for s in summary:
        print(f"| {s['threads']} | {s['engine']} | {s['prefill_2k_tps']} | {s['prefill_8k_tps']} | "
              f"{s['decode_1k_tps']} | {s['decode_8k_tps']} | {s['prefill_32k_tps']} | {s['decode_32k_tps']} |")
    # speculative decoding changes no token; 16-bit K/V pages may (by their rounding)
    for a, b, what in (("longdoc-int8", "longdoc-int8-nospec", "speculative"),
                       ("longdoc-int8-nospec-kv16", "longdoc-int8-nospec-kv32", "16-bit K/V"),
                       ("longdoc-int8-kv16", "longdoc-int8-kv32", "16-bit K/V")):
        if a in workers and b in workers:
            key = ("threads", "case", "rep")
            ref = {tuple(r[k] for k in key): r.get("tokens_out") for r in rows if r["engine"] == b}
            pairs = [(r.get("tokens_out") or [], ref.get(tuple(r[k] for k in key)) or []) for r in rows
                     if r["engine"] == a]
            same = sum(x == y for x, y in pairs)
            lead = [next((i for i, (u, w) in enumerate(zip(x, y, strict=False)) if u != w),
                         min(len(x), len(y))) for x, y in pairs]
            print(f"{a} ({what}) gave the tokens of {b} in {same} of {len(pairs)} runs; tokens in common before "
                  f"the first difference: {lead}")
    loads = [r["load_before"] for r in rows] + [r["load_after"] for r in rows]
    print(f"load average over the run: min {min(loads):.2f}, median {statistics.median(loads):.2f}, max {max(loads):.2f}")
    out = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "machine": platform.platform(),
           "cpu_count": os.cpu_count(), "reps": args.reps, "steps": args.steps,
           "load_s": {n: w.info.get("load_s") for n, w in workers.items()}, "summary": summary, "rows": rows}
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
