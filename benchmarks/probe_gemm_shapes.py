"""What a new row count costs a bfloat16 GEMM the first time (issue 18): a process's first batch of
16 x 32K Gemma prompts spent ~4.5 s more in its mixed steps (prefill chunks and decode rows in one
step) than a second batch, after `warmup()` (BENCHMARKS.md, "The warm tier, first batches and CPU
decode"). A mixed step's row count is the chunks' rows plus its decode rows, a new number in
almost every step, and every projection of the layer runs on it; this probe times, in one fresh
process, the first and the second call of each of Gemma 3 270M's projections (q/k/v, o, gate/up,
down) at row counts base + k, k = 0..16, then other bases, CUDA-synchronised.

    python3 benchmarks/probe_gemm_shapes.py [--bases 14336 2048] [--json out.json]

If first calls cost tens of milliseconds where second calls cost tens of microseconds, padding a
step's rows to a multiple (with rows whose outputs are dropped) bounds the shapes a process sees.
"""

from __future__ import annotations

import argparse
import json
import time

import torch

# (name, in, out): Gemma 3 270M's projections (hidden 640, 4 q heads and 1 kv head of 256, MLP 2048)
PROJ = [("qkv", 640, 1536), ("o", 1024, 640), ("gate_up", 640, 4096), ("down", 2048, 640)]


def sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def timed(fn) -> float:
    sync()
    t = time.perf_counter()
    fn()
    sync()
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bases", type=int, nargs="+", default=[14336, 2048])
    ap.add_argument("--extra", type=int, default=16, help="row counts base .. base + extra")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")  # the CPU: a smoke test of the script
    w = {name: torch.randn(o, i, device=dev, dtype=torch.bfloat16) / i**0.5 for name, i, o in PROJ}
    rows = []
    for base in args.bases:
        for k in range(args.extra + 1):
            m = base + k
            firsts, seconds = [], []
            for name, i, _o in PROJ:
                x = torch.randn(m, i, device=dev, dtype=torch.bfloat16)
                firsts.append(timed(lambda x=x, name=name: torch.nn.functional.linear(x, w[name])))
                seconds.append(timed(lambda x=x, name=name: torch.nn.functional.linear(x, w[name])))
            rows.append({"rows": m, "first_ms": [round(f * 1e3, 3) for f in firsts],
                         "second_ms": [round(s * 1e3, 3) for s in seconds]})
            print(f"rows {m:6d}: first " + " ".join(f"{n}={f * 1e3:7.2f}" for (n, _, _), f in zip(PROJ, firsts, strict=True))
                  + " ms | second " + " ".join(f"{s * 1e3:6.3f}" for s in seconds), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": torch.cuda.get_device_name() if dev.type == "cuda" else "cpu", "torch": torch.__version__,
                       "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
