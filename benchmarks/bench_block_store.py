"""Benchmark: DiskStore write and read throughput, and the cost of `weights_digest` on the real GGUF.

    python benchmarks/bench_block_store.py [--entries 64] [--mib 1] [--reps 3] [--root DIR]
                                                 [--no-digest] [--json out.json]

Each rep writes `--entries` entries of `--mib` MiB of tensor payload (a K and a V bf16 tensor, half
each) into a fresh store under `--root` (default: a temp folder), then reads them all back
(verify size, magic, checksum, header, key, fingerprint, 16 token ids; copy out of the mapping):
  write         put() with durable=True (fsync of the file and of its folder), the default;
  write_nosync  put() with durable=False;
  read_warm     get() right after writing (file pages in the page cache);
  read_cold     get() after posix_fadvise(DONTNEED) on each file (pages dropped, read from disk).
MB/s = entries * mib * 2**20 / 1e6 / seconds, median over reps. `sha256` is hashlib's throughput on
64 MiB in memory, the checksum's ceiling.

The digest part times `weights_digest` on the packaged Gemma 3 270M GGUF (page cache warm), on a
fresh copy of it whose pages were dropped (cold), and a full SHA-256 of the file for comparison.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from engine.kv.block_hash import weights_digest  # noqa: E402
from engine.kv.cold.disk_store import DiskStore  # noqa: E402

FP = "f" * 64


def drop_pages(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def one_rep(root: Path, entries: int, mib: int) -> dict[str, float]:
    numel = mib * 2**20 // 2 // 2  # bf16, two tensors
    g = torch.Generator().manual_seed(0)
    data = [
        {"k": torch.randn(numel, generator=g).bfloat16(), "v": torch.randn(numel, generator=g).bfloat16()}
        for _ in range(entries)
    ]
    keys = [f"{i:064x}" for i in range(entries)]
    toks = [[i] * 16 for i in range(entries)]
    out = {}
    for name, durable in (("write", True), ("write_nosync", False)):
        folder = root / name
        store = DiskStore(folder, 4 * entries * mib * 2**20, durable=durable)
        t = time.perf_counter()
        for key, tk, ts in zip(keys, toks, data, strict=True):
            assert store.put(key, tk, ts, fingerprint=FP)
        out[name] = time.perf_counter() - t
    store = DiskStore(root / "write", 4 * entries * mib * 2**20)
    t = time.perf_counter()
    for key, tk, ts in zip(keys, toks, data, strict=True):
        e = store.get(key, tokens=tk, fingerprint=FP)
        assert e is not None and e.tensors["k"].numel() == ts["k"].numel()
    out["read_warm"] = time.perf_counter() - t
    for key in keys:
        drop_pages(store.path_for(key))
    t = time.perf_counter()
    for key, tk in zip(keys, toks, strict=True):
        assert store.get(key, tokens=tk, fingerprint=FP) is not None
    out["read_cold"] = time.perf_counter() - t
    out["file_bytes"] = store.bytes_used / entries
    shutil.rmtree(root / "write")
    shutil.rmtree(root / "write_nosync")
    return out


def bench_digest() -> dict[str, float]:
    from engine.paths import default_model_path

    gguf = default_model_path()
    weights_digest(gguf)  # warm
    warm = statistics.median(timed(lambda: weights_digest(gguf)) for _ in range(5))
    with tempfile.TemporaryDirectory(dir=gguf.parent) as tmp:
        copy = Path(tmp) / gguf.name
        shutil.copyfile(gguf, copy)
        fd = os.open(copy, os.O_RDONLY)
        os.fsync(fd)
        os.close(fd)
        drop_pages(copy)
        cold = timed(lambda: weights_digest(copy))
    full = timed(lambda: hashlib.file_digest(open(gguf, "rb"), "sha256"))
    return {"file": str(gguf), "file_mb": gguf.stat().st_size / 1e6, "digest_warm_ms": warm * 1e3,
            "digest_cold_ms": cold * 1e3, "full_sha256_warm_ms": full * 1e3}


def timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--entries", type=int, default=64)
    ap.add_argument("--mib", type=int, default=1)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--root", type=Path, default=None)
    ap.add_argument("--no-digest", action="store_true")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()

    blob = os.urandom(64 << 20)
    sha = timed(lambda: hashlib.sha256(blob).digest())
    with tempfile.TemporaryDirectory(dir=args.root) as tmp:
        reps = [one_rep(Path(tmp) / f"rep{i}", args.entries, args.mib) for i in range(args.reps)]
    mb = args.entries * args.mib * 2**20 / 1e6
    result = {
        "machine": {"python": platform.python_version(), "torch": torch.__version__, "cpus": os.cpu_count(),
                    "root": str(args.root or tempfile.gettempdir())},
        "entries": args.entries, "mib_per_entry": args.mib, "file_bytes": reps[0]["file_bytes"],
        "sha256_mb_s": 64 * 2**20 / 1e6 / sha,
    }
    for name in ("write", "write_nosync", "read_warm", "read_cold"):
        secs = statistics.median(r[name] for r in reps)
        result[f"{name}_mb_s"] = mb / secs
        result[f"{name}_ms_per_entry"] = secs / args.entries * 1e3
    if not args.no_digest:
        result["weights_digest"] = bench_digest()
    print(json.dumps(result, indent=2))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
