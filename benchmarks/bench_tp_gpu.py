"""Tensor parallelism on several GPUs of one host (issue 22's GPU part; needs a machine of >= 2 GPUs):
the same random-weight HF folder through `LLM(model=folder, device="cuda", tensor_parallel_size=W)`
for W = 1 and each W asked, one after the other in this process, public API and defaults otherwise.

Per W: load time; logits of a 512-token prompt against W = 1 (max |diff| and argmax agreement over
its positions, bf16); time to first token at each length (a fresh prompt each); decode time per
token of one request at --decode-ctx; and, for W > 1, the share of rank 0's GPU kernel time that is
NCCL (all-reduces and the logits gather) over the decode steps, from torch.profiler.

    python3 benchmarks/bench_tp_gpu.py --tp 2 --out tp.json [--lengths 32768,131072] [--tiny]

`--tiny` runs toy shapes (a CPU-free smoke test on any machine with >= W GPUs). A 70B shape is not
here: its random weights would be ~140 GB on disk, more than the x2 machine's 128 GB."""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.bench_engine_gpu import hf_configs  # noqa: E402
from benchmarks.bench_user_path_gpu import prompt, save_folder  # noqa: E402


def sync_now() -> float:
    torch.cuda.synchronize()
    return time.perf_counter()


def nccl_share(llm, ids: list[int], steps: int) -> float:
    """NCCL kernels' share of rank 0's CUDA kernel time over `steps` decode tokens."""
    from engine import SamplingParams

    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        llm.generate([ids], SamplingParams(max_tokens=steps, ignore_eos=True))
        torch.cuda.synchronize()
    total = nccl = 0.0
    for e in prof.key_averages():
        t = getattr(e, "self_device_time_total", 0.0) or getattr(e, "self_cuda_time_total", 0.0)
        total += t
        if "nccl" in e.key.lower():
            nccl += t
    return nccl / total if total else 0.0


def run(folder: Path, world: int, lengths: list[int], decode_ctx: int, steps: int, vocab: int, ref_ids: list[int],
        log) -> tuple[dict, torch.Tensor]:
    from engine import LLM, SamplingParams

    t = time.perf_counter()
    llm = LLM(model=folder, device="cuda", tensor_parallel_size=world, max_model_len=max(lengths + [decode_ctx]) + 64)
    out = {"tensor_parallel_size": world, "load_s": round(time.perf_counter() - t, 2)}
    try:
        logits = llm.prompt_logits(ref_ids).float().cpu()
        llm.generate([prompt(vocab, 256, 1)], SamplingParams(max_tokens=4, ignore_eos=True))  # first-call costs
        for i, n in enumerate(lengths):
            t = sync_now()
            llm.generate([prompt(vocab, n, 100 + i)], SamplingParams(max_tokens=1, ignore_eos=True))
            out[f"ttft_{n}_s"] = round(sync_now() - t, 3)
            log(f"W={world} TTFT {n}: {out[f'ttft_{n}_s']} s")
        ids = prompt(vocab, decode_ctx, 7)
        res = llm.generate([ids], SamplingParams(max_tokens=steps + 1, ignore_eos=True))[0]
        m = res.metrics
        out["decode_ms_per_token"] = round(1e3 * m["itl_mean_s"], 3)
        log(f"W={world} decode @{decode_ctx}: {out['decode_ms_per_token']} ms/token")
        if world > 1:
            out["nccl_share_of_decode_kernels"] = round(nccl_share(llm, prompt(vocab, decode_ctx, 8), steps), 3)
            log(f"W={world} NCCL share of decode kernel time: {out['nccl_share_of_decode_kernels']}")
    finally:
        llm.close()
        torch.cuda.empty_cache()
    return out, logits


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="llama8b")
    ap.add_argument("--tp", default="2", help="comma-separated sizes besides 1")
    ap.add_argument("--lengths", default="32768,131072")
    ap.add_argument("--decode-ctx", type=int, default=32768)
    ap.add_argument("--steps", type=int, default=32)
    ap.add_argument("--tiny", action="store_true")
    ap.add_argument("--out", default="tp_gpu.json")
    a = ap.parse_args()
    lengths = [int(x) for x in a.lengths.split(",")] if not a.tiny else [512, 1024]
    decode_ctx = a.decode_ctx if not a.tiny else 1024
    worlds = [1] + [int(x) for x in a.tp.split(",")]
    if torch.cuda.device_count() < max(worlds):
        raise SystemExit(f"needs {max(worlds)} GPUs, {torch.cuda.device_count()} visible")
    cfg = hf_configs(a.tiny)[a.model]

    def log(msg: str) -> None:
        print(msg, flush=True)

    results = {"model": a.model, "gpus": torch.cuda.device_count(), "gpu": torch.cuda.get_device_name(0),
               "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "runs": []}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / a.model
        save_folder(cfg, folder, "cuda")
        ref_ids = prompt(cfg.vocab_size, 512, 3)
        ref = None
        for w in worlds:
            row, logits = run(folder, w, lengths, decode_ctx, a.steps, cfg.vocab_size, ref_ids, log)
            if ref is None:
                ref = logits
            else:
                row["logits_max_abs_diff_vs_tp1"] = round((logits - ref).abs().max().item(), 5)
                row["argmax_agreement_vs_tp1"] = round((logits.argmax(-1) == ref.argmax(-1)).float().mean().item(), 4)
                log(f"W={w} logits vs W=1: max |diff| {row['logits_max_abs_diff_vs_tp1']}, "
                    f"argmax agreement {row['argmax_agreement_vs_tp1']}")
            results["runs"].append(row)
    print(json.dumps(results, indent=1))
    Path(a.out).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
