"""What a new sequence length costs cuDNN's fused attention (issue 18: a process's first 8K request
paid ~0.5 s after `warmup()` with cuDNN on). Attention only, the Llama-3-8B heads (32 q / 8 kv of
128, bfloat16), through `engine.attention.triton_backend.sdpa_cudnn` exactly as the engine calls it:
for each shape in order, the first call and a second call timed (CUDA-synchronised), in one fresh
process. Shapes: a chunk with no prefix (square, causal) and a chunk after a prefix (two cuDNN calls
merged), at lengths that are and are not multiples of 64 / 128.

    python3 benchmarks/probe_cudnn_shapes.py [--align 128] [--json out.json]

--align 0 passes the exact lengths; 128 (the engine's default, CUDNN_ALIGN) pads them. Run each
setting in its own process with CUDA_CACHE_DISABLE=1, or the driver's on-disk JIT cache lets a
later process skip compiles an earlier one paid.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engine.attention.triton_backend import sdpa_cudnn  # noqa: E402

# (label, chunk rows T, prefix rows P): in this order in one process
SHAPES = [
    ("square aligned, first ever", 16384, 0),
    ("square aligned, new length", 8192, 0),
    ("square unaligned /16", 8176, 0),
    ("square unaligned /16, second new", 8112, 0),
    ("square odd", 8001, 0),
    ("square odd, second new", 7777, 0),
    ("square aligned /128, new", 12288, 0),
    ("prefix aligned", 16384, 16384),
    ("prefix aligned, new P", 16384, 32768),
    ("prefix, unaligned T", 3000, 32768),
    ("prefix, unaligned T and P", 3000, 32000),
    ("prefix, new unaligned T", 2999, 32768),
    ("prefix, odd P", 16384, 49999),
]


def timed(fn) -> float:
    torch.cuda.synchronize()
    t = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", default=None)
    ap.add_argument("--align", type=int, default=None, help="sdpa_cudnn's align (default: the engine's)")
    args = ap.parse_args()
    dev = torch.device("cuda")
    h, kvh, d = 32, 8, 128
    g = torch.Generator(device=dev).manual_seed(0)
    rows = []
    print(f"{torch.cuda.get_device_name()} torch {torch.__version__} cudnn {torch.backends.cudnn.version()} "
          f"align {args.align} env " + " ".join(f"{k}={v}" for k, v in os.environ.items()
                                               if k.startswith(("TORCH_CUDNN", "CUDA_CACHE", "LONGDOC"))), flush=True)
    for label, t, p in SHAPES:
        q = torch.randn(t, h, d, device=dev, dtype=torch.bfloat16, generator=g)
        k = torch.randn(t + p, kvh, d, device=dev, dtype=torch.bfloat16, generator=g)
        v = torch.randn(t + p, kvh, d, device=dev, dtype=torch.bfloat16, generator=g)
        call = functools.partial(sdpa_cudnn, q, k, v, d**-0.5, align=args.align)
        first, second = timed(call), timed(call)
        rows.append({"label": label, "T": t, "P": p, "first_ms": first * 1e3, "second_ms": second * 1e3})
        print(f"{label:36s} T={t:6d} P={p:6d}  first {first * 1e3:9.1f} ms  second {second * 1e3:8.2f} ms", flush=True)
        del call, q, k, v
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
