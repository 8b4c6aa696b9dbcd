"""`longdoc bench`: one reproducible load on the engine, with latency, counters and memory.

A run sends `batch` requests of `prompt_length` tokens at once (random token ids from a seeded
generator, so no tokenizer effects and no accidental prefix sharing between them), each generating
`max_new_tokens` greedy tokens, and repeats that `repeat` times with the same prompts: the second
and later rounds show the prefix cache (their prompts are already cached). Reported:

- per round: `engine.core.metrics.summarize` over its requests (TTFT mean/p50/p99, inter-token latency
  mean/p50/p99, output tokens/s) and the prompt tokens served from a cache;
- per round, the prompt tokens served from the prefix cache and its hit rate over the round's
  prompt tokens (a repeated prompt is served up to its tail: engine/kv/prefix_cache.py);
- at the top level: `fallback_triggered` (whether any request went through the long-request
  fallback; these token prompts never exceed the context, so it is False unless the engine's
  fallback counter moved), `kv_fragmentation` (slots allocated but not holding a token, share),
  and `peak_memory` (the process's peak RSS, and on CUDA the peak device memory,
  torch.cuda.max_memory_allocated);
- the engine's counters after the run (`LLM.counters()`: blocks per tier, prefix hit rate, swaps,
  preemptions, fallbacks, fragmentation) and the scheduler's;
- with `memory_profile`: weight bytes, KV pool bytes (hot and warm), KV bytes per token of a
  request (by tier, and the same blocks counted at bf16 for comparison), and the peaks again.
"""

from __future__ import annotations

import resource
import sys
import time
from typing import Any

import torch

from engine.core.metrics import RequestMetrics, summarize
from engine.core.sampling import SamplingParams


def _prompts(vocab: int, n: int, batch: int, seed: int) -> list[list[int]]:
    gen = torch.Generator().manual_seed(seed)
    return [torch.randint(3, vocab, (n,), generator=gen).tolist() for _ in range(batch)]


def _peak_rss_bytes() -> int:
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss if sys.platform == "darwin" else rss * 1024  # Linux reports KiB


def run_bench(llm, prompt_length: int, max_new_tokens: int, batch: int = 1, repeat: int = 2, seed: int = 0,
              memory_profile: bool = False) -> dict[str, Any]:
    cuda = llm.device.type == "cuda"
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    prompts = _prompts(llm.config.vocab_size, prompt_length, batch, seed)
    params = SamplingParams(max_tokens=max_new_tokens, ignore_eos=True)
    rounds = []
    for r in range(repeat):
        reqs: dict[int, RequestMetrics] = {}
        t0 = time.perf_counter()
        for i in range(batch):
            reqs[i] = RequestMetrics.start(prompt_length, now=t0)
        hits0 = llm.prefix.stats.hit_tokens + llm.prefix.stats.cold_hit_tokens
        for d in llm.stream(prompts, params):
            t = time.perf_counter()
            for _ in d.token_ids:
                reqs[d.index].record_token(t)
        summary = summarize(list(reqs.values()))
        summary["round"] = r + 1
        summary["wall_s"] = time.perf_counter() - t0
        summary["cached_prompt_tokens"] = llm.prefix.stats.hit_tokens + llm.prefix.stats.cold_hit_tokens - hits0
        summary["prefix_hit_rate"] = summary["cached_prompt_tokens"] / (batch * prompt_length)
        rounds.append(summary)
    counters = llm.counters().to_dict()
    peak = {"peak_rss_bytes": _peak_rss_bytes()}
    if cuda:
        peak["peak_device_bytes"] = torch.cuda.max_memory_allocated()
    result: dict[str, Any] = {
        "model": str(llm.model_path),
        "device": str(llm.device),
        "dtype": str(llm.dtype).removeprefix("torch."),
        "backend": llm.backend.name,
        "prompt_length": prompt_length,
        "max_new_tokens": max_new_tokens,
        "batch": batch,
        "rounds": rounds,
        "fallback_triggered": counters["fallbacks"] > 0,
        "kv_fragmentation": counters["fragmentation"],
        "peak_memory": peak,
        "counters": counters,
        "scheduler": llm.sched_counters.to_dict(),
        "prefix_cache": llm.prefix.stats.to_dict(),
    }
    if memory_profile:
        result["memory"] = memory_profile_of(llm, prompts[0])
        result["memory"]["peak_rss_bytes"] = _peak_rss_bytes()
        if cuda:
            result["memory"]["peak_device_bytes"] = torch.cuda.max_memory_allocated()
    return result


def memory_profile_of(llm, prompt: list[int]) -> dict[str, Any]:
    """Weights and KV pool bytes, and KV bytes per token of `prompt` held after its prefill (the
    sequence's blocks by tier, demoted as the warm tier's policy says)."""
    weights = sum(p.numel() * p.element_size() for p in llm.model.parameters())
    kv = llm.kv
    seq, _, _ = llm.core.prefill_collect(list(prompt), rows_from=len(prompt))  # demotes between chunks
    try:
        held = kv.kv_bytes(seq.tables)
        as_bf16 = kv.kv_bytes(seq.tables, hot_elem_size=2)
        all_hot_bf16 = sum(
            2 * kv.block_size * g.k.shape[3] * g.k.shape[4] * 2 * len(g.layers) * sum(1 for e in t if e != -1)
            for g, t in zip(kv.groups, seq.tables, strict=True)
        )
    finally:
        llm.core.free(seq)
    n = max(1, len(prompt))
    return {
        "weights_bytes": weights,
        "kv_pool_hot_bytes": kv.bytes,
        "kv_pool_warm_bytes": kv.warm_bytes,
        "kv_bytes_per_token": held["total"] / n,
        "kv_bytes_per_token_hot": held["hot"] / n,
        "kv_bytes_per_token_warm": held["warm"] / n,
        "kv_bytes_per_token_if_hot_were_bf16": as_bf16["total"] / n,
        "kv_bytes_per_token_all_bf16": all_hot_bf16 / n,
        "kv_ratio_vs_all_bf16": held["total"] / all_hot_bf16 if all_hot_bf16 else None,
        # the same blocks with the hot ones at bf16: what a bf16 deployment holds against all-bf16
        "kv_ratio_vs_all_bf16_with_bf16_hot": as_bf16["total"] / all_hot_bf16 if all_hot_bf16 else None,
    }


def format_text(res: dict[str, Any]) -> str:
    lines = [f"{res['model']} on {res['device']} ({res['dtype']}, {res['backend']} backend): "
             f"{res['batch']} x {res['prompt_length']}-token prompts, {res['max_new_tokens']} new tokens"]

    def ms(x: float | None) -> str:
        return "-" if x is None else f"{x * 1e3:.1f} ms"

    for r in res["rounds"]:
        tps = "-" if r["tokens_per_s"] is None else f"{r['tokens_per_s']:.1f}"
        lines.append(f"round {r['round']}: TTFT mean {ms(r['ttft_mean_s'])} p50 {ms(r['ttft_p50_s'])} "
                     f"p99 {ms(r['ttft_p99_s'])}; ITL mean {ms(r['itl_mean_s'])} p50 {ms(r['itl_p50_s'])} "
                     f"p99 {ms(r['itl_p99_s'])}; {tps} tokens/s; cached prompt tokens {r['cached_prompt_tokens']} "
                     f"({r['prefix_hit_rate']:.0%})")
    c = res["counters"]
    hr = "-" if c["prefix_hit_rate"] is None else f"{c['prefix_hit_rate']:.0%}"
    lines.append(f"blocks: hot {c['blocks']['hot']}, warm {c['blocks']['warm']}, host {c['blocks']['host']}, "
                 f"disk {c['blocks']['disk']}; prefix hit rate {hr}; swaps out/in {c['swaps_out']}/{c['swaps_in']}; "
                 f"preemptions {c['preemptions']}; fallbacks {c['fallbacks']}; fragmentation {c['fragmentation']:.1%}"
                 + (f"; speculative drafts accepted {c['spec_accepted']} of {c['spec_drafted']}"
                    if c.get("spec_drafted") else ""))
    pk = res["peak_memory"]
    lines.append(f"fallback triggered: {'yes' if res['fallback_triggered'] else 'no'}; peak RSS "
                 f"{pk['peak_rss_bytes'] / 2**30:.2f} GiB"
                 + (f", peak device {pk['peak_device_bytes'] / 2**30:.2f} GiB" if "peak_device_bytes" in pk else ""))
    m = res.get("memory")
    if m:
        lines.append(f"memory: weights {m['weights_bytes'] / 2**20:.0f} MiB, KV pool {m['kv_pool_hot_bytes'] / 2**20:.0f} MiB "
                     f"hot + {m['kv_pool_warm_bytes'] / 2**20:.0f} MiB warm; KV per token {m['kv_bytes_per_token']:.0f} B "
                     f"({m['kv_ratio_vs_all_bf16']:.2f}x all-bf16; {m['kv_ratio_vs_all_bf16_with_bf16_hot']:.2f}x with bf16 hot pages); peak RSS {m['peak_rss_bytes'] / 2**30:.2f} GiB"
                     + (f", peak device {m['peak_device_bytes'] / 2**30:.2f} GiB" if "peak_device_bytes" in m else ""))
    return "\n".join(lines)
