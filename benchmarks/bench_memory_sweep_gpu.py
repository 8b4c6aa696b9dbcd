"""Issue 18's large-pool check as a user meets it: `LLM(model=folder, device="cuda",
cache=CacheConfig(memory_budget=b), scheduler=SchedulerConfig(max_num_seqs=16))` for b in 0.1 … 0.9, a fresh decode-tuning
cache for every run, and 16 prompts of 32K tokens submitted together (4 tokens each). Before the 64-bit offsets
a Gemma pool at 0.8 crashed the CUDA context in the decode tuner ("illegal memory access").

    python3 benchmarks/bench_memory_sweep_gpu.py --out sweep.json [--models gemma,llama8b]
        [--budgets 0.1,0.3,0.5,0.7,0.9] [--tiny]

Each (model, budget) runs in its own process, so a crash that kills one CUDA context cannot hide
the others' results; a run reports ok, seconds, the pool's size (blocks, bytes per tensor, whether
a pool tensor passes 2**31 elements), the engine's counters (preemptions, swaps) and any error line.
Random bf16 weights of the real shapes (benchmarks/bench_engine_gpu.py's configs), saved once as
HF folders. `--tiny` is a CPU smoke test (toy shapes, 2 prompts of 256 tokens).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def one(folder: str, budget: float, n: int, length: int, dev: str) -> dict:
    """One (model, budget) run in this process; prints its JSON line."""
    import torch

    from engine import LLM, CacheConfig, SamplingParams, SchedulerConfig

    out: dict = {"budget": budget, "ok": False}
    t0 = time.perf_counter()
    try:
        llm = LLM(model=folder, device=dev, cache=CacheConfig(memory_budget=budget), scheduler=SchedulerConfig(max_num_seqs=n))
        out["load_s"] = round(time.perf_counter() - t0, 2)
        pools = [t for t in _pool_tensors(llm)]
        out["pool_tensor_elements_max"] = max((t.numel() for t in pools), default=0)
        out["pool_past_2_31"] = out["pool_tensor_elements_max"] > 2**31
        out["pool_gib"] = round(sum(t.numel() * t.element_size() for t in pools) / 2**30, 2)
        vocab = llm.config.vocab_size
        g = torch.Generator().manual_seed(7)
        prompts = [torch.randint(3, min(vocab, 32000), (length,), generator=g).tolist() for _ in range(n)]
        t1 = time.perf_counter()
        res = llm.generate(prompts, SamplingParams(max_tokens=4, ignore_eos=True))
        if dev == "cuda":
            torch.cuda.synchronize()
        out["generate_s"] = round(time.perf_counter() - t1, 2)
        out["tokens_out"] = [len(r.token_ids) for r in res]
        out["counters"] = {k: v for k, v in llm.counters().to_dict().items()
                           if k in ("preemptions", "swaps", "recomputes", "fallbacks", "fragmentation")}
        out["ok"] = all(len(r.token_ids) == 4 for r in res)
    except Exception as exc:  # noqa: BLE001 - the run's verdict is the point
        out["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:300] if str(exc) else ''}"
    out["seconds"] = round(time.perf_counter() - t0, 2)
    return out


def _pool_tensors(llm):
    import torch

    seen = set()
    for obj in (llm.kv, *llm.kv.groups):
        for name in vars(obj):
            if name.startswith("__"):
                continue
            try:
                val = getattr(obj, name)
            except Exception:  # noqa: BLE001
                continue
            vals = val if isinstance(val, (list, tuple)) else [val]
            for v in vals:
                if isinstance(v, torch.Tensor) and v.numel() > 1_000_000 and id(v) not in seen:
                    seen.add(id(v))
                    yield v


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="sweep.json")
    ap.add_argument("--models", default="gemma,llama8b")
    ap.add_argument("--budgets", default="0.1,0.2,0.3,0.4,0.5,0.6,0.7,0.8,0.9")
    ap.add_argument("--budgets-8b", default="0.1,0.3,0.5,0.7,0.9")
    ap.add_argument("--tiny", action="store_true")
    ap.add_argument("--one", nargs=2, metavar=("FOLDER", "BUDGET"))
    ap.add_argument("--n", type=int, default=16)
    ap.add_argument("--length", type=int, default=32768)
    args = ap.parse_args()
    dev = "cuda" if not args.tiny else "cpu"
    if args.one:
        print("RESULT " + json.dumps(one(args.one[0], float(args.one[1]), args.n, args.length, dev)), flush=True)
        return

    import torch

    from benchmarks.bench_engine_gpu import hf_configs
    from benchmarks.bench_user_path_gpu import save_folder

    n, length = (2, 256) if args.tiny else (args.n, args.length)
    env = dict(os.environ)
    results: dict = {"n": n, "length": length, "device": torch.cuda.get_device_name() if dev == "cuda" else "cpu",
                     "torch": torch.__version__, "runs": {}}
    with tempfile.TemporaryDirectory() as tmp:
        cfgs = hf_configs(args.tiny)
        for name in args.models.split(","):
            folder = Path(tmp) / name
            t0 = time.perf_counter()
            save_folder(cfgs[name], folder, dev)
            print(f"{name}: saved in {time.perf_counter() - t0:.1f} s", flush=True)
            budgets = args.budgets_8b if name == "llama8b" else args.budgets
            runs = results["runs"][name] = []
            for b in budgets.split(","):
                # a fresh tuning cache for every run: the crash needed an empty one (the tuner's
                # tables reached the pool's last blocks first)
                env["LONGDOC_TUNING_CACHE"] = str(Path(tmp) / f"tuning-{name}-{b}")
                cmd = [sys.executable, __file__, "--one", str(folder), b, "--n", str(n), "--length", str(length)]
                if args.tiny:
                    cmd.append("--tiny")
                p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
                line = next((ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")), None)
                r = json.loads(line[7:]) if line else {"budget": float(b), "ok": False,
                                                       "error": f"exit {p.returncode}: {p.stderr.strip()[-300:]}"}
                runs.append(r)
                print(f"{name} budget {b}: {'ok' if r['ok'] else 'FAILED'} {r.get('generate_s', '')} s "
                      f"pool {r.get('pool_gib', '?')} GiB past 2^31: {r.get('pool_past_2_31')} "
                      f"{r.get('counters', '')} {r.get('error', '')}", flush=True)
            Path(args.out).write_text(json.dumps(results, indent=2))
    ok = sum(r["ok"] for runs in results["runs"].values() for r in runs)
    total = sum(len(runs) for runs in results["runs"].values())
    print(f"memory sweep: {ok}/{total} runs completed {n} x {length} tokens without error")
    if ok != total:
        sys.exit(1)


if __name__ == "__main__":
    main()
