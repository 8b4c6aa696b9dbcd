"""Tensor parallelism on this CPU: the same model, prompt and greedy decode through
`LLM(..., tensor_parallel_size=1)` and `=2` in one run, one after the other (the other process
idle). Reports load time, prefill tokens/s, decode tokens/s and, for TP=2, the share of rank 0's
decode time spent in the all-reduces and the vocabulary gather (waiting for rank 1 included).

Usage: python benchmarks/bench_tp_cpu.py [--model PATH] [--prompt 2048] [--new 64] [--out FILE.json]
(default: the packaged Gemma 3 270M as `LLM()` loads it, int8 weights on the CPU; a path given loads
float weights)."""

from __future__ import annotations

import argparse
import json
import time

import torch

from engine import LLM, SamplingParams
from engine.paths import default_model_path


def one(model, world: int, prompt: list[int], prompt2: list[int], new: int, threads: int) -> dict:
    torch.set_num_threads(threads)
    t0 = time.perf_counter()
    llm = LLM(model=model, device="cpu", tensor_parallel_size=world, max_model_len=len(prompt) + new + 64)
    load = time.perf_counter() - t0
    try:
        llm.generate([prompt[:64]], SamplingParams(max_tokens=2, ignore_eos=True))  # first-call costs
        t = time.perf_counter()
        llm.generate([prompt], SamplingParams(max_tokens=1, ignore_eos=True))
        prefill = time.perf_counter() - t
        tp = llm.tp
        c0, n0 = (tp.comm_s, tp.comm_calls) if tp else (0.0, 0)
        t = time.perf_counter()
        out = llm.generate([prompt2], SamplingParams(max_tokens=new, ignore_eos=True))[0]
        total = time.perf_counter() - t
        ttft = out.metrics["ttft_s"]
        decode = total - ttft
        comm = (tp.comm_s - c0) if tp else 0.0
        return {
            "tensor_parallel_size": world, "threads_per_rank": torch.get_num_threads(), "load_s": round(load, 2),
            "prefill_tokens": len(prompt), "prefill_s": round(prefill, 3),
            "prefill_tokens_per_s": round(len(prompt) / prefill, 1),
            "decode_tokens": len(out.token_ids) - 1, "decode_tokens_per_s": round((len(out.token_ids) - 1) / decode, 2),
            "rank0_collective_s": round(comm, 3), "rank0_collective_calls": (tp.comm_calls - n0) if tp else 0,
            "collective_share_of_request": round(comm / total, 3) if tp else 0.0,
            "tokens": out.token_ids,
        }
    finally:
        llm.close()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=None)
    ap.add_argument("--prompt", type=int, default=2048)
    ap.add_argument("--new", type=int, default=64)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    model = a.model  # None: the packaged model, as LLM() loads it (int8 weights on the CPU; a path means float)
    g = torch.Generator().manual_seed(0)
    prompt = torch.randint(100, 30000, (a.prompt,), generator=g).tolist()
    prompt2 = torch.randint(100, 30000, (a.prompt,), generator=g).tolist()
    cores = torch.get_num_threads()
    rows = [one(model, 1, prompt, prompt2, a.new, cores), one(model, 2, prompt, prompt2, a.new, cores)]
    same = rows[0].pop("tokens") == rows[1].pop("tokens")
    res = {"model": (model or str(default_model_path())).rsplit("/", 1)[-1], "weights": "int8" if model is None else "float",
           "cores": cores, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
           "same_tokens": same, "runs": rows}
    print(json.dumps(res, indent=1))
    if a.out:
        with open(a.out, "w") as fh:
            json.dump(res, fh, indent=1)


if __name__ == "__main__":
    main()
