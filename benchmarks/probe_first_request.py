"""Why a request after `LLM.warmup()` is slow (issue 18): a model (random weights, HF folder,
defaults), warmup, then prompts of several lengths timed one after another (TTFT, max_tokens=1),
with the Triton kernels each request compiled (new entries of a fresh TRITON_CACHE_DIR): what a
length no earlier request had costs, and whether it is a Triton specialisation or something else
(cuDNN's plans leave no trace there).

    python3 benchmarks/probe_first_request.py [--model gemma|llama8b]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp(prefix="triton-probe-")  # before any compile: a fresh cache

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.bench_engine_gpu import hf_configs  # noqa: E402
from benchmarks.bench_user_path_gpu import now, prompt, save_folder  # noqa: E402


def compiled() -> set[str]:
    """The kernels in the Triton cache: '<dir>/<kernel>.json' entries (one per compiled specialisation)."""
    root = Path(os.environ["TRITON_CACHE_DIR"])
    return {f"{f.parent.name[:8]}/{f.stem}" for f in root.glob("*/*.json") if not f.name.startswith("__grp__")}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="gemma")
    ap.add_argument("--tiny", action="store_true")
    args = ap.parse_args()
    from engine import LLM, SamplingParams

    dev = "cpu" if args.tiny else "cuda"
    cfg = hf_configs(args.tiny)[args.model]
    one = SamplingParams(max_tokens=1, ignore_eos=True)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / args.model
        save_folder(cfg, folder, dev)
        llm = LLM(model=folder, device=dev)
        t = time.perf_counter()
        llm.warmup()
        print(f"warmup {time.perf_counter() - t:.1f} s, chunk {llm.scheduler_config.max_prefill_chunk}", flush=True)
        lengths = [256, 250, 512] if args.tiny else [8192, 8155, 8155, 8229, 4096, 16001, 16000, 30000, 24577]
        seen = compiled()
        for k, n in enumerate(lengths):
            p = prompt(cfg.vocab_size, n, seed=100 + k)
            t = now()
            llm.generate([p], one)
            dt = now() - t
            new = compiled() - seen
            seen |= new
            names = sorted(x.split("/")[1] for x in new)
            print(f"len {n}: {dt:.3f} s, {len(new)} Triton kernels compiled {names}", flush=True)


if __name__ == "__main__":
    main()
