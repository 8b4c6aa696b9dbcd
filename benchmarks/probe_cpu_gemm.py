"""Int8 weights on the CPU: the many-row products (prefill) through `_weight_int8pack_mm` against a
bfloat16 copy and oneDNN's GEMM (engine/model/quant.py: GEMM_ROWS, LONGDOC_CPU_BF16_GEMM), each
setting in a fresh process, the packaged Gemma 3 270M through the public API with its defaults.

Per setting and thread count: prefill time of a 2,048- and an 8,192-token prompt of real contract
text (time to the first token of `generate`, max_tokens=1, a different window each), greedy decode
ms per token after a 1,024-token prompt, and (one thread) the perplexity of 2,047 tokens of the
GitHub ToS v2 (the text BENCHMARKS.md's int8 perplexity uses), scored through `prompt_logits`.

    python benchmarks/probe_cpu_gemm.py [--threads 1 2] [--float32] [--gemm bf16|fp32] [--out FILE.json]

--gemm fp32 toggles the float32 GEMMs of CPUs without bfloat16 ones (LONGDOC_CPU_FP32_GEMM) instead
of the bfloat16 copies (LONGDOC_CPU_BF16_GEMM)."""

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
CORPUS = [ROOT / f"data/samples/contracts/{d}/{v}.txt" for d in ("en-commonpaper-csa-1.0-to-1.1",
          "en-commonpaper-dpa-1.0-to-1.1", "en-github-tos-2017-10-to-2018-05") for v in ("v1", "v2")]


def worker(threads: int, ppl: bool, dtype: str | None = None) -> dict:
    import torch

    sys.path.insert(0, str(ROOT))
    torch.set_num_threads(threads)
    from engine import LLM, SamplingParams

    t = time.perf_counter()
    llm = LLM(device="cpu", max_model_len=10000, dtype=dtype)  # dtype "float32": float weights, the reference
    out = {"load_s": round(time.perf_counter() - t, 2)}
    ids = []
    for p in CORPUS:
        ids += llm.encode(p.read_text(encoding="utf-8"), add_special_tokens=False)
    llm.generate([ids[:64]], SamplingParams(max_tokens=2, ignore_eos=True))
    at = 1000
    for n in (2048, 8192):
        prompt = ids[at:at + n]
        at += n
        t = time.perf_counter()
        llm.generate([prompt], SamplingParams(max_tokens=1, ignore_eos=True))
        dt = time.perf_counter() - t
        out[f"prefill_{n}_tok_s"] = round(n / dt, 1)
    res = llm.generate([ids[at:at + 1024]], SamplingParams(max_tokens=33, ignore_eos=True))[0]
    out["decode_1k_ms"] = round(1e3 * res.metrics["itl_mean_s"], 2)
    if ppl:
        held = llm.encode(TEXT.read_text(encoding="utf-8"))[:2048]
        logits = llm.prompt_logits(held)
        lp = torch.log_softmax(logits[:-1].float(), -1).gather(1, torch.tensor(held[1:])[:, None])
        out["perplexity_2047"] = round(math.exp(-float(lp.mean())), 4)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--out", default=None)
    ap.add_argument("--float32", action="store_true", help="also the float32 reference (first thread count)")
    ap.add_argument("--gemm", choices=["bf16", "fp32"], default="bf16", help="which many-row GEMM to toggle")
    ap.add_argument("--worker", nargs=3, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker:
        print(json.dumps(worker(int(a.worker[0]), a.worker[1] == "1", a.worker[2] if a.worker[2] != "-" else None)))
        return
    rows = []
    if a.float32:
        r = subprocess.run([sys.executable, __file__, "--worker", str(a.threads[0]), "1", "float32"],
                           env=dict(os.environ, OMP_NUM_THREADS=str(a.threads[0])), capture_output=True, text=True,
                           check=True)
        rows.append({"threads": a.threads[0], "weights": "float32", **json.loads(r.stdout.strip().splitlines()[-1])})
        print(rows[-1], flush=True)
    for th in a.threads:
        for gemm in ("0", "1"):
            env = dict(os.environ, OMP_NUM_THREADS=str(th))
            env[f"LONGDOC_CPU_{a.gemm.upper()}_GEMM"] = gemm
            r = subprocess.run([sys.executable, __file__, "--worker", str(th), "1" if th == a.threads[0] else "0", "-"],
                               env=env, capture_output=True, text=True, check=True)
            row = {"threads": th, "weights": "int8", f"{a.gemm}_gemm": gemm == "1",
                   **json.loads(r.stdout.strip().splitlines()[-1])}
            print(row, flush=True)
            rows.append(row)
    res = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "rows": rows}
    if a.out:
        Path(a.out).write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
