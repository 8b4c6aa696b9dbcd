"""Where the INT8 warm tier's batched prefill time goes (issue 18): Gemma 3 270M shape (random
weights), 16 prompts of 32K tokens admitted together, time to the last first token with bf16
pages only and with the warm tier (every global-layer block outside the sinks and a 256-token hot
window INT8), each configuration warmed up and then timed twice on fresh prompts, with the
scheduler's steps (how many, tokens per step, seconds per step); then twice as bench_engine_gpu's
e2e case streams them (`--new-tokens` each), the steps before the last first token by kind; with
`--profile`, one warm-tier batch of `--profile-ctx` tokens under torch.profiler (the top CUDA
kernels and host ops); with `--user-warmup`, `LLM.warmup()` first and the e2e batch straight after
it (what a user's first batch costs), with the Triton compiles and decode tunings that fell inside
it (the step each came in) and its slowest steps.

    python3 benchmarks/probe_warm_prefill.py [--ctx 32768] [--batch 16] [--profile [--profile-ctx 8192]] [--user-warmup] [--tiny]

LONGDOC_PREFILL_READS_INT8=1 makes the prefill kernel read warm pages directly (the default
dequantises the visible prefix into a temporary).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.bench_engine_gpu import (  # noqa: E402
    build_pair,
    engine_llm,
    hf_configs,
    kv_budget,
    now,
    rand_prompt,
    warm_tier_kw,
)


def make(eng, cfg, dev, ctx: int, batch: int, warm: bool):
    """The LLM bench_engine_gpu.engine_decode_e2e builds for `batch` prompts of `ctx` tokens."""
    chunk = min(ctx, max(2048, 32768 // batch))
    extra = 4 * batch
    return engine_llm(eng, cfg, dev, ctx + extra + 64, batch, chunk, budget=kv_budget(cfg, ctx + extra, batch, chunk),
                      **(warm_tier_kw(cfg, ctx + extra, batch) if warm else {}))


def count_steps(llm) -> list:
    """Wrap the runner's execute: (rows, seconds, prefill chunks, decode rows, warm blocks in use
    after the step) per step, the step synchronised."""
    steps: list = []
    inner = llm.runner.execute

    def timed(step, *a, **k):
        t = now()
        out = inner(step, *a, **k)
        if out.is_cuda:
            torch.cuda.synchronize()
        npre = len(step.prefills)
        secs = now() - t
        warm_used = sum(llm.kv.blocks_per_tier()["warm_used"])
        steps.append((int(step.ids.numel()), secs, npre, int(step.ids.numel()) - step.decode_start, warm_used))
        return out

    llm.runner.execute = timed
    return steps


# where trace_first_use's hooks record: None between first batches (the hooks are installed once
# per process and stay; nothing is recorded outside a traced batch)
_TRACE: dict[str, list | None] = {"events": None}
_HOOKED = False


def trace_first_use(events: list) -> None:
    """Record into `events` every in-process Triton compile (or load from Triton's disk cache) as
    ("compile", kernel, seconds, steps so far) and every decode tuning as ("tune", key, seconds,
    steps so far), until `report_first_use`; `events` holds the step list at [0] (count_steps'),
    entries after it. The hooks are installed on the first call."""
    global _HOOKED
    _TRACE["events"] = events
    if _HOOKED:
        return
    _HOOKED = True
    import time as _time

    from triton.runtime import jit as tjit

    from longdoc_kernels import paged_attention as pa

    def record(kind, what, t0):
        ev = _TRACE["events"]
        if ev is not None:
            ev.append((kind, what, _time.perf_counter() - t0, len(ev[0])))

    inner_compile = getattr(tjit.JITFunction, "_do_compile", None)
    if inner_compile is not None:
        def do_compile(self, *a, **k):
            t = _time.perf_counter()
            out = inner_compile(self, *a, **k)
            record("compile", getattr(self, "__name__", "?"), t)
            return out

        tjit.JITFunction._do_compile = do_compile
    inner_tune = pa._tune_decode

    def tune(launch, key, *a, **k):
        t = _time.perf_counter()
        out = inner_tune(launch, key, *a, **k)
        record("tune", key, t)
        return out

    pa._tune_decode = tune


def report_first_use(tag: str, events: list, steps: list) -> None:
    """What the first batch paid for: compiles and tunings (with the step they fell in), and its
    slowest steps (rows, prefill chunks, decode rows, seconds). Recording stops here."""
    _TRACE["events"] = None
    for ev in events[1:]:
        kind, what, secs, at = ev
        print(f"[{tag}]   {kind} {what} {secs * 1e3:.0f} ms (step {at})", flush=True)
    slow = sorted(range(len(steps)), key=lambda i: -steps[i][1])[:6]
    print(f"[{tag}]   slowest steps: " + ", ".join(
        f"#{i} {steps[i][1] * 1e3:.0f} ms ({steps[i][0]} rows, {steps[i][2]} chunks, {steps[i][3]} decodes)" for i in slow),
        flush=True)


def e2e_batch(llm, cfg, ctx: int, batch: int, gen, steps: list, new_tokens: int) -> None:
    """As bench_engine_gpu's e2e decode case: the prompts streamed with `new_tokens` each (the early
    sequences decode while the later ones prefill); the time to the last first token, and the
    steps before it by kind (prefill-only, mixed, decode-only) with their seconds."""
    from engine import SamplingParams

    prompts = [rand_prompt(cfg.vocab_size, ctx, gen) for _ in range(batch)]
    core = llm.core
    before = core.scheduler.counters.to_dict()
    steps.clear()
    t = now()
    first: dict[int, float] = {}
    n_at_last_first = 0
    for d in llm.stream(prompts, SamplingParams(max_tokens=new_tokens, ignore_eos=True)):
        if d.index not in first:
            first[d.index] = now() - t
            n_at_last_first = len(steps)
    kinds: dict[str, list[float]] = {}
    for _rows, secs, npre, ndec, _warm in steps[:n_at_last_first]:
        kind = "prefill" if ndec == 0 else ("decode" if npre == 0 else "mixed")
        kinds.setdefault(kind, []).append(secs)
    after = core.scheduler.counters.to_dict()
    print(f"  e2e {batch} x {ctx} + {new_tokens} new: first token {min(first.values()):.2f} s, last first token "
          f"{max(first.values()):.2f} s over {n_at_last_first} steps: "
          + ", ".join(f"{k} {len(v)} steps {sum(v):.2f} s (median {statistics.median(v) * 1e3:.1f} ms)"
                      for k, v in kinds.items())
          + f"; warm blocks in use at most {max((s[4] for s in steps), default=0)}"
          + f"; scheduler counters {({k: after[k] - before[k] for k in after})}", flush=True)


def ttft_batch(llm, cfg, ctx: int, batch: int, gen) -> float:
    from engine import SamplingParams

    prompts = [rand_prompt(cfg.vocab_size, ctx, gen) for _ in range(batch)]
    t = now()
    llm.generate(prompts, SamplingParams(max_tokens=1, ignore_eos=True))
    return now() - t


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ctx", type=int, default=32768)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--profile-ctx", type=int, default=8192)
    ap.add_argument("--tiny", action="store_true")
    ap.add_argument("--new-tokens", type=int, default=113, help="e2e: tokens per sequence (bench_engine_gpu: 48 + 1 + 64)")
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--user-warmup", action="store_true",
                    help="call LLM.warmup() as the CLI and UI do, then run the e2e batch first, before the probe's own warm-up "
                         "(does a user's first batch pay for tuning?)")
    args = ap.parse_args()
    from engine import SamplingParams

    dev = "cpu" if args.tiny else "cuda"
    ctx = max(64, args.ctx // 128) if args.tiny else args.ctx
    pctx = max(64, args.profile_ctx // 128) if args.tiny else args.profile_ctx
    hf, eng, cfg = build_pair(hf_configs(args.tiny)["gemma"], dev)
    del hf
    gen = torch.Generator().manual_seed(0)
    for warm in (False, True):
        tag = "warm INT8" if warm else "bf16 pages"
        llm = make(eng, cfg, dev, ctx, args.batch, warm)
        if args.user_warmup:
            t = now()
            graphs = llm.warmup()
            print(f"[{tag}] LLM.warmup(): {now() - t:.1f} s, {graphs} graphs captured; then the first e2e batch:", flush=True)
            first_steps = count_steps(llm)
            events = [first_steps]
            if dev == "cuda":
                trace_first_use(events)
            e2e_batch(llm, cfg, ctx, args.batch, gen, first_steps, args.new_tokens)
            report_first_use(tag, events, first_steps)
            del llm.runner.execute  # unwrap the step timer (an instance attribute over the method)
        t = now()
        llm.generate([rand_prompt(cfg.vocab_size, min(1024, ctx), gen) for _ in range(args.batch)],
                     SamplingParams(max_tokens=4, ignore_eos=True))
        ttft_batch(llm, cfg, min(ctx, 4096), args.batch, gen)  # every chunk shape once
        print(f"[{tag}] warm-up {now() - t:.1f} s", flush=True)
        steps = count_steps(llm)
        for _rep in range(2):
            steps.clear()
            took = ttft_batch(llm, cfg, ctx, args.batch, gen)
            secs = [s[1] for s in steps]
            print(f"[{tag}] {args.batch} x {ctx}: time to last first token {took:.2f} s; {len(steps)} steps, "
                  f"median {statistics.median(secs) * 1e3:.1f} ms, max {max(secs) * 1e3:.1f} ms, "
                  f"sum {sum(secs):.2f} s, rows/step median {statistics.median([s[0] for s in steps])}, "
                  f"warm blocks in use at most {max(s[4] for s in steps)}", flush=True)
            if warm:
                print(f"[{tag}] blocks per tier after the batch: {llm.kv.blocks_per_tier()}", flush=True)
        for _ in range(2):
            e2e_batch(llm, cfg, ctx, args.batch, gen, steps, args.new_tokens)
        if warm and dev == "cuda" and args.profile:
            from torch.profiler import ProfilerActivity, profile

            with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
                ttft_batch(llm, cfg, pctx, args.batch, gen)
                torch.cuda.synchronize()
            ka = prof.key_averages()
            print(f"[{tag}] profiled {args.batch} x {pctx}: top CUDA time", flush=True)
            print(ka.table(sort_by="cuda_time_total", row_limit=25, max_name_column_width=70), flush=True)
            print(f"[{tag}] top host time (self)", flush=True)
            print(ka.table(sort_by="self_cpu_time_total", row_limit=25, max_name_column_width=70), flush=True)
        del llm
        if dev == "cuda":
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
