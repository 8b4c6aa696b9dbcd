"""Benchmark: the scheduler under a memory budget too small for all requests at once, with the real
Gemma 3 270M on the CPU (issue 5's bar: it queues or swaps, every request completes, with the same
tokens as when run alone).

    python benchmarks/bench_scheduler.py [--requests 4] [--prompt 1500] [--new 48] [--fit 2.2]
        [--json out.json]

`--requests` prompts of `--prompt` tokens (real text, each from a different offset of the
fixture contracts) each generate `--new` greedy tokens. The KV budget gives Gemma 3's sliding-window
pools (window + chunk per sequence, whatever the prompt) room for `--fit` sequences. Each request is first run alone, then all are run together, in four
configurations:

- swap: preemption by swap to host memory;
- recompute: preemption by recompute;
- swap + warm tier (sliding layers too, hot window 64), demotion watermark 1.0: old blocks go to
  INT8 only under pressure, before anything is preempted;
- queue only: the scheduler admits while projected use stays under the watermark, else queues.

Printed per configuration: wall time, preemptions (swap / recompute), steps that ended with
requests queued, peak hot blocks, and whether each request's tokens equal its alone run (for
the warm-tier run, "alone" means alone with the same warm tier, which demotes nothing when
memory lasts, so tokens may legitimately differ where pressure demoted blocks; the share of
equal tokens is printed).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import platform
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

FILLER = [ROOT / "tests/fixtures/contracts" / n for n in (
    "en-commonpaper-csa-1.0-to-1.1/v2.txt", "en-commonpaper-dpa-1.0-to-1.1/v2.txt",
    "en-github-tos-2017-10-to-2018-05/v1.txt")]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=4)
    ap.add_argument("--prompt", type=int, default=1500)
    ap.add_argument("--new", type=int, default=48)
    ap.add_argument("--fit", type=float, default=2.0, help="sequences the sliding-window pools have room for")
    ap.add_argument("--chunk", type=int, default=512)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    torch.set_num_threads(1)

    from engine import LLM, CacheConfig, SamplingParams, SchedulerConfig

    probe = LLM(device="cpu", dtype="float32", cache=CacheConfig(memory_budget=2**28),
                scheduler=SchedulerConfig(max_model_len=8192, max_prefill_chunk=args.chunk, max_num_seqs=1))
    text = "\n\n".join(p.read_text() for p in FILLER)
    ids = probe.encode(text, add_special_tokens=False)
    bos = probe.encode("", add_special_tokens=True)
    step = max(1, (len(ids) - args.prompt) // max(1, args.requests))
    prompts = [bos + ids[i * step : i * step + args.prompt - len(bos)] for i in range(args.requests)]
    params = SamplingParams(max_tokens=args.new, ignore_eos=True)
    # Gemma 3's sliding-window pools need window + chunk per sequence whatever the prompt length
    # (with one sequence's room here), the global pool the whole context: the budget gives the
    # sliding pools room for `fit` sequences (they take at most half of it), the global pool the rest
    sliding_seq = sum(g.k.numel() * g.k.element_size() * 2 for g in probe.kv.groups if g.window is not None)
    del probe
    budget = int(2 * args.fit * sliding_seq)

    def engine(sched: SchedulerConfig, **cache_kw) -> LLM:
        cache = CacheConfig(memory_budget=budget, **cache_kw)
        sched = dataclasses.replace(sched, max_model_len=8192, max_prefill_chunk=args.chunk, max_num_seqs=args.requests)
        return LLM(device="cpu", dtype="float32", cache=cache, scheduler=sched)

    configs = {
        "swap": (SchedulerConfig(preemption="swap", watermark=0.95), {}),
        "recompute": (SchedulerConfig(preemption="recompute", watermark=0.95), {}),
        "swap + warm (watermark 1.0)": (SchedulerConfig(preemption="swap", watermark=0.95),
                                        dict(warm_budget=64 * 2**20, hot_window=64, warm_sliding=True,
                                             demote_watermark=1.0)),
        "queue only (admission 0.6)": (SchedulerConfig(preemption="swap", watermark=0.6), {}),
    }
    lines, rows = [], []

    def out(s: str = "") -> None:
        print(s, flush=True)
        lines.append(s)

    out("# bench_scheduler: the scheduler under a memory budget too small for all requests (issue 5)")
    out(f"command: python {' '.join(sys.argv)}")
    out(f"machine: {platform.machine()} CPU, torch {torch.__version__}, 1 thread; date "
        f"{time.strftime('%Y-%m-%dT%H:%M:%S%z')}")
    out(f"{args.requests} requests x ({args.prompt} prompt + {args.new} new tokens); KV budget {budget / 2**20:.1f} MiB "
        f"(sliding pools for {args.fit} sequences); chunk {args.chunk}")
    alone_cache: dict[str, list[list[int]]] = {}
    for name, (sched, cache_kw) in configs.items():
        key = "warm" if cache_kw else "plain"
        if key not in alone_cache:
            solo = engine(SchedulerConfig(), **cache_kw)
            alone_cache[key] = [solo.generate([p], params)[0].token_ids for p in prompts]
            del solo
        alone = alone_cache[key]
        llm = engine(sched, **cache_kw)
        peak = [0]
        fwd = llm.runner.forward

        def counting(*a, llm=llm, fwd=fwd, peak=peak, **k):
            peak[0] = max(peak[0], sum(llm.kv.blocks_per_tier()["hot_used"]))
            return fwd(*a, **k)

        llm.runner.forward = counting
        t0 = time.perf_counter()
        res = llm.generate(prompts, params)
        wall = time.perf_counter() - t0
        sc = llm.sched_counters
        same = [r.token_ids == a for r, a in zip(res, alone, strict=True)]
        share = sum(x == y for r, a in zip(res, alone, strict=True) for x, y in zip(r.token_ids, a, strict=True)) / (
            args.requests * args.new)
        row = dict(config=name, wall_s=round(wall, 1), completed=sum(len(r.token_ids) == args.new for r in res),
                   preempted_swap=sc.preempted_swap, preempted_recompute=sc.preempted_recompute,
                   queued_steps=sc.queued_steps, steps=sc.steps, peak_hot_blocks=peak[0],
                   hot_blocks_total=sum(g.num_blocks for g in llm.kv.groups), identical_to_alone=sum(same),
                   token_share_equal=round(share, 3), copy_bytes_to_host=llm.kv.copier.stats.bytes_to_host)
        rows.append(row)
        out(f"{name:30s} {row['wall_s']:7.1f} s  done {row['completed']}/{args.requests}  swaps {sc.preempted_swap}  "
            f"recomputes {sc.preempted_recompute}  queued steps {sc.queued_steps}/{sc.steps}  peak hot "
            f"{peak[0]}/{row['hot_blocks_total']}  identical to alone {sum(same)}/{args.requests} "
            f"(tokens {share:.3f})")
    if args.json:
        args.json.write_text(json.dumps({"args": vars(args) | {"json": str(args.json)}, "rows": rows}, indent=1))
        args.json.with_suffix(".txt").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
