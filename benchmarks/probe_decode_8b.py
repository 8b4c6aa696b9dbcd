"""Probe: where a Llama-3-8B-shaped decode step at batch 1 and 32K spends its time (a torch
profile of the eager step). A planning diagnostic for the decode bandwidth target (numbers reach
BENCHMARKS.md only as explanations).

    python3 benchmarks/probe_decode_8b.py [--ctx 32768] [--batch 1] [--skip-profile]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def profile_step(ctx: int, batch: int = 1, tiny: bool = False) -> None:
    from bench_engine_gpu import engine_llm, hf_configs, kv_budget, rand_prompt
    from torch.profiler import ProfilerActivity, profile

    from engine.core.sampling import SamplingParams, sample_batch
    from engine.core.sequence import Sequence
    from engine.model.loader.random_weights import hf_to_engine_config, random_model

    dev = "cpu" if tiny else "cuda"
    cfg = hf_to_engine_config(hf_configs(tiny)["llama8b"])
    eng = random_model(cfg, dev, torch.bfloat16, seed=0)
    gen = torch.Generator().manual_seed(0)
    from longdoc_kernels import paged_attention as pa

    for graphs in (False, True):
        llm = engine_llm(eng, cfg, dev, ctx + 64, batch, 4096, budget=kv_budget(cfg, ctx + 32, batch, 4096),
                         graphs=graphs)
        for g in llm.kv.groups:
            for t in (g.k, g.v):
                t.normal_()
        llm.runner.on_computed = None
        seqs = []
        for i in range(batch):
            s = Sequence(1 + i, rand_prompt(cfg.vocab_size, ctx, gen), SamplingParams(max_tokens=40, ignore_eos=True))
            s.tables = llm.kv.new_tables()
            llm.kv.allocate_slots(s.tables, 0, ctx)
            s.num_cached = ctx
            s.output_ids.append(5)
            seqs.append(s)

        def step(llm=llm, seqs=seqs) -> None:
            hidden = llm.runner.forward([], seqs)
            logits = llm.model.logits(hidden)
            toks = sample_batch(logits, [s.params for s in seqs], [[] for _ in seqs], [None] * len(seqs))
            for s, t in zip(seqs, toks, strict=True):
                s.output_ids.append(t)

        for _ in range(4):
            step()
        if tiny:  # a CPU smoke test of the setup
            print("tiny step ok", seqs[0].output_ids[-3:])
            continue
        torch.cuda.synchronize()
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        for _ in range(10):
            step()
        e1.record()
        e1.synchronize()
        print(f"== step b={batch} ctx={ctx} graphs={graphs}: {e0.elapsed_time(e1) / 10:.3f} ms; "
              f"decode launches tuned: {pa.DECODE_TUNED}")
        if not graphs:
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                for _ in range(3):
                    step()
                torch.cuda.synchronize()
            print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=16, max_name_column_width=60))
        for s in seqs:
            llm.kv.free(s.tables)
        del llm, step, seqs  # the next pass builds its own cache
        torch.cuda.empty_cache()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ctx", type=int, default=32768)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--skip-profile", action="store_true")
    ap.add_argument("--tiny", action="store_true", help="CPU smoke test of the profile setup only")
    args = ap.parse_args()
    if args.tiny:
        profile_step(256, batch=2, tiny=True)
        return
    if not args.skip_profile:
        profile_step(args.ctx, args.batch)


if __name__ == "__main__":
    main()
