"""Held-text perplexity with the CPU decode step's C kernels (longdoc_kernels/cpu) on and off, int8
weights (the CPU default) and float32 (the reference), each setting in a fresh process, the
packaged Gemma 3 270M through the public API (issue 18: within 1% of float32).

Two scorings of the GitHub ToS v2 (the text of BENCHMARKS.md's earlier int8 perplexities):
- "decode": 1,023 tokens through one-token steps (`prompt_logits(chunk=1)`: every product, norm and
  attention of a decode step, the path the kernels take);
- "prefill": 2,047 tokens through `prompt_logits` with its default chunks (the GEMM paths; only a
  chunk's last rows under 64 and its small norms take the kernels).

With --kv16 also the 16-bit K/V pages (`CacheConfig(kv_dtype="float16")`, kernels on) for both
weight kinds; the other rows keep the model's dtype for the pages (float32).

    python benchmarks/probe_cpu_kernels_ppl.py [--threads 1] [--kv16] [--out FILE.json]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TEXT = ROOT / "data/samples/contracts/en-github-tos-2017-10-to-2018-05/v2.txt"


def worker(threads: int, weights: str, kv_dtype: str | None = None) -> dict:
    import torch

    sys.path.insert(0, str(ROOT))
    torch.set_num_threads(threads)
    from engine import LLM, CacheConfig
    from longdoc_kernels import cpu

    llm = LLM(device="cpu", max_model_len=4096, dtype="float32" if weights == "float32" else None,
              cache=CacheConfig(kv_dtype=kv_dtype))
    out = {"weights": llm.weights, "kernels": cpu.status().split(":")[0], "kv_dtype": str(llm.kv.dtype)}
    ids = llm.encode(TEXT.read_text(encoding="utf-8"))
    for name, n, chunk in (("decode", 1024, 1), ("prefill", 2048, None)):
        held = ids[:n]
        t = time.perf_counter()
        logits = llm.prompt_logits(held, chunk=chunk) if chunk else llm.prompt_logits(held)
        lp = torch.log_softmax(logits[:-1].float(), -1).gather(1, torch.tensor(held[1:])[:, None])
        out[f"{name}_ppl_{n - 1}"] = round(math.exp(-float(lp.mean())), 4)
        out[f"{name}_s"] = round(time.perf_counter() - t, 1)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", default=None)
    ap.add_argument("--kv16", action="store_true", help="also 16-bit K/V pages, kernels on")
    ap.add_argument("--worker", nargs=3, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker:
        print(json.dumps(worker(int(a.worker[0]), a.worker[1], None if a.worker[2] == "-" else a.worker[2])))
        return
    rows = []
    runs = [(w, k, "-") for w in ("float32", "int8") for k in ("1", "0")]
    if a.kv16:
        runs += [(w, "1", "float16") for w in ("float32", "int8")]
    for weights, kernels, kv in runs:
        env = dict(os.environ, OMP_NUM_THREADS=str(a.threads), LONGDOC_CPU_KERNELS=kernels)
        r = subprocess.run([sys.executable, __file__, "--worker", str(a.threads), weights, kv], env=env,
                           capture_output=True, text=True, check=True)
        row = json.loads(r.stdout.strip().splitlines()[-1])
        rows.append(row)
        print(json.dumps(row), flush=True)
    if a.out:
        Path(a.out).write_text(json.dumps({"argv": sys.argv, "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
