"""Benchmark: quality of the KV cache modes (issue 5) with the real Gemma 3 270M on the CPU —
perplexity on long public texts and passkey (needle) retrieval over lengths and depths, for full
precision, the warm INT8 tier and sparse (Quest-style) decode, side by side.

    OMP_NUM_THREADS=1 python benchmarks/bench_quality.py [--lengths 1024 2048 4096 8192]
        [--depths 0.1 0.3 0.5 0.7 0.9] [--keys 2] [--sparse-top-k 8 16] [--hot-window 256]
        [--sink-tokens 16] [--chunk 512] [--new-tokens 8] [--ppl-docs patents tos] [--ppl-max N]
        [--no-check] [--max-minutes M] [--json out.json] [--txt out.txt]

Modes (one `LLM()` each for full and warm, the packaged GGUF, float32, torch reference backend):
- full: no warm tier; every K/V stays float32.
- warm-int8: `CacheConfig.warm_budget` large enough for a whole 32K context, `hot_window`
  (default 256) and `sink_tokens` (16): after every prefill chunk and decode step the engine demotes
  (`PagedKVCache.demote`) every full block older than the hot window, except the sink block, to
  INT8 (a scale per kv head and block). Only the global-attention layers have a warm pool (Gemma 3:
  layers 5, 11, 17 of 18); the sliding layers (window 512) keep their own window at full precision.
  The number of blocks that really are warm is read back from the block tables and the warm pool's
  counters (`blocks_per_tier`) and printed.
- sparse-kN: warm-int8 plus `sparse_top_k = N` warm blocks per decode query (engine/attention/sparse.py).
  Sparse selection changes decode only, so it reuses the warm-int8 prefill (see below) and has no
  perplexity of its own: scoring a long text by one decode step per token would take hours here.

Perplexity: the text is tokenized with BOS and prefilled in chunks of `--chunk` tokens
(`EngineCore.prefill_collect`, what `LLM.score` runs); each chunk's tokens are scored from the final
hidden states of that chunk, which attended to the cache holding everything before it. With the
warm tier the cache is demoted after every chunk, so chunk c attends to INT8 K/V for all of its
global layers' context except the sinks and the last `hot_window` tokens before the chunk (and the
chunk itself). Perplexity = exp(-mean log p(token_i | tokens_<i)) over tokens 1..N-1; also reported
over the positions >= 2048 only (where most of the context is INT8). Same chunking in both modes.

Passkey: filler = real text (Common Paper CSA and DPA 1.1, GitHub ToS 2017-10; tests/fixtures/
contracts, provenance there), started at a different offset per key; the line
"The pass key is NNNNN. Remember it. NNNNN is the pass key." inserted as its own line at depth d
(share of the filler before it, snapped to a line start), then "What is the pass key? The pass key
is"; the prompt is exactly L tokens. Greedy decode of `--new-tokens` tokens; correct if the five
digits appear in the decoded text. Each mode prefills the prompt itself (`_prefill_collect`, chunked,
demoting like generate() does); the first token comes from the prefill, the others from decode
steps (`ModelRunner.forward` + `demote` after each, as `EngineCore.step` does). The warm prefill is shared
by the dense and sparse decodes: each decode runs on a fork of the sequence (its block tables with
every block's reference count raised, so nothing it frees or demotes touches the original). `--check`
(on by default) first confirms that this path gives the same tokens as `LLM.generate`, per mode.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import math
import os
import platform
import random
import subprocess
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

FIX = ROOT / "tests" / "fixtures"
PPL_DOCS = {
    # name: (files, licence note)
    "patents": (sorted((FIX / "patents").glob("US*.txt")),
                "claims of 8 US patents (USPTO grant XML; US government work, public domain), joined; "
                "tests/fixtures/patents/PROVENANCE.md"),
    "tos": ([FIX / "contracts" / "en-github-tos-2017-10-to-2018-05" / "v2.txt"],
            "GitHub Terms of Service 2018-05-25 (github/site-policy, CC0 1.0 public-domain dedication); "
            "tests/fixtures/contracts/PROVENANCE.md"),
}
FILLER = [FIX / "contracts" / "en-commonpaper-csa-1.0-to-1.1" / "v2.txt",
          FIX / "contracts" / "en-commonpaper-dpa-1.0-to-1.1" / "v2.txt",
          FIX / "contracts" / "en-github-tos-2017-10-to-2018-05" / "v1.txt"]
NEEDLE = "The pass key is {k}. Remember it. {k} is the pass key."
QUESTION = "\nWhat is the pass key? The pass key is"
BLOCK = 16

LOG: list[str] = []
TXT: Path | None = None


def out(line: str = "") -> None:
    print(line, flush=True)
    LOG.append(line)
    if TXT is not None:
        TXT.write_text("\n".join(LOG) + "\n")


def make_llm(args, warm: bool):
    from engine import LLM, CacheConfig, SchedulerConfig

    cfg = CacheConfig(memory_budget=1 * 2**30)
    if warm:
        # INT8 block of one layer: 2*16*kvh*d + 2*kvh*4 + 2*kvh*d bytes; Gemma 3 270M kvh=1, d=256 -> 8712;
        # 3 global layers x 2048 blocks (32K tokens) = 53.5 MB: 128 MiB holds a whole context.
        cfg = dataclasses.replace(cfg, warm_budget=128 * 2**20, hot_window=args.hot_window,
                                  sink_tokens=args.sink_tokens, warm_sliding=args.warm_sliding)
    sched = SchedulerConfig(max_num_seqs=1, max_model_len=32768, max_prefill_chunk=args.chunk)
    llm = LLM(device="cpu", dtype="float32", cache=cfg, scheduler=sched)
    if warm:
        g = llm.kv.groups[0]
        assert g.window is None and g.warm is not None and g.warm.num_blocks >= 32768 // BLOCK
    return llm


def warm_count(llm, seq) -> dict:
    """Blocks of a live sequence per tier in the global group(s): from its tables and the pool counters."""
    kv = llm.kv
    tiers = kv.blocks_per_tier()
    warm_entries = sum(sum(1 for e in t if e <= -2) for g, t in zip(kv.groups, seq.tables, strict=True) if g.window is None)
    hot_entries = sum(sum(1 for e in t if e >= 0) for g, t in zip(kv.groups, seq.tables, strict=True) if g.window is None)
    demotable_max = sum(max(0, max(0, seq.num_cached - kv.hot_window) // BLOCK - kv.sink_blocks)
                        for g in kv.groups if g.window is None) if kv.has_warm() else 0
    return {"warm_blocks": warm_entries, "hot_blocks": hot_entries, "expected_warm": demotable_max,
            "warm_pool_used": sum(tiers["warm_used"]),
            "warm_tokens": warm_entries * BLOCK, "cached_tokens": seq.num_cached}


# ----------------------------------------------------------------------------------- perplexity
@torch.inference_mode()
def perplexity(llm, ids: list[int]) -> dict:
    t = time.perf_counter()
    seq, hidden, _ = llm.core.prefill_collect(ids, 0)  # LLM.score's path; demotes after every chunk
    counts = warm_count(llm, seq)
    llm.core.free(seq)
    target = torch.tensor(ids[1:])
    lps = []
    for s in range(0, len(ids) - 1, 256):
        lp = torch.log_softmax(llm.model.logits(hidden[s : min(s + 256, len(ids) - 1)]), dim=-1)
        lps.append(lp.gather(1, target[s : s + 256, None])[:, 0])
    lp = torch.cat(lps)
    tail = lp[2047:]  # tokens at positions >= 2048
    return {"tokens": len(ids), "scored": int(lp.numel()), "ppl": math.exp(-float(lp.mean())),
            "ppl_pos_ge_2048": math.exp(-float(tail.mean())) if tail.numel() else None,
            "seconds": time.perf_counter() - t, "logprobs": lp, **counts}


# ----------------------------------------------------------------------------------- passkey
def build_prompt(llm, filler: list[int], nl_ok: set[int], length: int, depth: float, key: int, start: int) -> tuple[list[int], int]:
    needle = llm.encode("\n" + NEEDLE.format(k=key) + "\n", add_special_tokens=False)
    question = llm.encode(QUESTION, add_special_tokens=False)
    bos = llm.encode("", add_special_tokens=True)
    n_fill = length - len(bos) - len(needle) - len(question)
    body = [filler[(start + i) % len(filler)] for i in range(n_fill)]
    at = round(depth * n_fill)
    # snap to just after a newline token (a line start) within 64 tokens
    for delta in range(64):
        for cand in (at - delta, at + delta):
            if 0 < cand < n_fill and body[cand - 1] in nl_ok:
                at = cand
                break
        else:
            continue
        break
    ids = bos + body[:at] + needle + body[at:] + question
    assert len(ids) == length
    return ids, at


@torch.inference_mode()
def fork_decode(llm, seq, first: int, n: int) -> list[int]:
    """Greedy-decode n-1 more tokens after `first` on a fork of `seq` (which stays untouched)."""
    from engine.core.sampling import SamplingParams
    from engine.core.sequence import Sequence

    kv = llm.kv
    fork = Sequence(llm.core.new_id(), list(seq.prompt_ids), SamplingParams(max_tokens=n))
    fork.tables = [list(t) for t in seq.tables]
    fork.num_cached, fork.rope_seq_len = seq.num_cached, seq.rope_seq_len
    fork.block_hashes = list(seq.block_hashes)
    for g, t in zip(kv.groups, fork.tables, strict=True):
        for e in t:
            if e >= 0:
                g.allocator.incref(e)
            elif e <= -2:
                g.warm.allocator.incref(-e - 2)
    eos = set(llm.config.eos_token_ids)
    toks = [first]
    try:
        while len(toks) < n and toks[-1] not in eos:
            fork.output_ids.append(toks[-1])
            h = llm.runner.forward([], [fork])
            kv.demote(fork.tables, fork.num_cached)  # as EngineCore.step does after every step
            toks.append(int(llm.model.logits(h[-1:]).argmax()))
    finally:
        llm.core.free(fork)
    return toks


@torch.inference_mode()
def run_prompt(llm, ids: list[int], n: int, sparse: list[int | None]) -> tuple[dict, dict, float]:
    """Prefill once, then one decode per entry of `sparse` (None: dense). Returns ({k: tokens}, counts, prefill s)."""
    t = time.perf_counter()
    seq, hidden, _ = llm.core.prefill_collect(ids, len(ids) - 1)
    dt = time.perf_counter() - t
    counts = warm_count(llm, seq)
    first = int(llm.model.logits(hidden[-1:]).argmax())
    res = {}
    try:
        for k in sparse:
            llm.kv.sparse_top_k = k
            res[k] = fork_decode(llm, seq, first, n)
    finally:
        llm.kv.sparse_top_k = None
        llm.core.free(seq)
    return res, counts, dt


def check_against_generate(llm, ids: list[int], n: int, sparse: list[int | None], name: str) -> None:
    from engine import SamplingParams

    mine, _, _ = run_prompt(llm, ids, n, sparse)
    for k in sparse:
        llm.clear_prefix_cache()  # so generate() computes (and demotes) everything itself
        llm.kv.sparse_top_k = k
        try:
            ref = llm.generate([ids], SamplingParams(max_tokens=n))[0].token_ids
        finally:
            llm.kv.sparse_top_k = None
        ok = ref == mine[k]
        out(f"check {name}{'' if k is None else f' sparse k={k}'}: fork decode == LLM.generate: {ok} {mine[k]}")
        assert ok, (ref, mine[k])
    llm.clear_prefix_cache()


# ----------------------------------------------------------------------------------- main
def git_state() -> str:
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "engine", "longdoc_kernels"], cwd=ROOT,
                               capture_output=True, text=True).stdout.split("\n")
        dirty = [d.strip() for d in dirty if d.strip()]
        return head + (f" (uncommitted in engine/ longdoc_kernels/ at run time: {', '.join(dirty)})" if dirty else "")
    except OSError:
        return "unknown"


def main() -> None:
    global TXT
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lengths", type=int, nargs="+", default=[1024, 2048, 4096, 8192])
    ap.add_argument("--depths", type=float, nargs="+", default=[0.1, 0.3, 0.5, 0.7, 0.9])
    ap.add_argument("--keys", type=int, default=2, help="random pass keys per (length, depth)")
    ap.add_argument("--sparse-top-k", type=int, nargs="*", default=[8, 16])
    ap.add_argument("--hot-window", type=int, default=256)
    ap.add_argument("--sink-tokens", type=int, default=16)
    ap.add_argument("--warm-sliding", action="store_true",
                    help="warm mode demotes the sliding-window layers' blocks too (CacheConfig.warm_sliding)")
    ap.add_argument("--chunk", type=int, default=512, help="prefill chunk (both modes)")
    ap.add_argument("--new-tokens", type=int, default=8)
    ap.add_argument("--ppl-docs", nargs="*", default=["patents", "tos"], choices=sorted(PPL_DOCS))
    ap.add_argument("--ppl-max", type=int, default=None, help="cut each perplexity text to this many tokens")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--max-minutes", type=float, default=None,
                    help="stop starting passkey trials after this many minutes (said so in the output)")
    ap.add_argument("--no-check", action="store_true")
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--txt", type=Path, default=None, help="also write the printed output here")
    args = ap.parse_args()
    torch.set_num_threads(1)
    TXT = args.txt
    t_all = time.perf_counter()

    out("# bench_quality: KV cache modes, quality (issue 5)")
    out("command: OMP_NUM_THREADS=" + os.environ.get("OMP_NUM_THREADS", "unset") + " "
        + " ".join([".venv/bin/python", *[str(a) for a in sys.argv]]))
    out(f"machine: {platform.machine()} CPU, {os.cpu_count()} cores (shared with other work), torch threads "
        f"{torch.get_num_threads()}; torch {torch.__version__}; python {platform.python_version()}")
    out(f"date: {datetime.datetime.now().astimezone().isoformat(timespec='seconds')}; git: {git_state()}")
    out("")

    full = make_llm(args, warm=False)
    warm = make_llm(args, warm=True)
    out(f"model: {full.model_path.name} ({full.config.num_layers} layers, {full.config.num_heads} q heads, {full.config.num_kv_heads} kv heads, head_dim {full.config.head_dim}, "
        f"windows {sorted({str(w) for w in full.config.layer_windows})}, global layers {full.config.global_layers}), "
        f"float32, CPU, backend {type(full.backend).__name__}")
    out(f"cache: block {BLOCK}, prefill chunk {args.chunk}; warm: hot_window {args.hot_window}, sink_tokens "
        f"{args.sink_tokens} ({warm.kv.sink_blocks} block), warm_sliding {args.warm_sliding}, warm pool {warm.kv.groups[0].warm.num_blocks} blocks "
        f"x {len(warm.kv.groups[0].layers)} global layers ({warm.kv.warm_bytes / 2**20:.1f} MiB); sparse top_k "
        f"{args.sparse_top_k} warm blocks per decode query")
    sparse_list: list[int | None] = [None, *args.sparse_top_k]
    modes = ["full", "warm-int8"] + [f"sparse-k{k}" for k in args.sparse_top_k]

    filler_text = "\n\n".join(p.read_text() for p in FILLER)
    filler = full.encode(filler_text, add_special_tokens=False)
    nl_ok = {t for t in set(filler) if full.tokenizer.decode([t]).endswith("\n")}
    out(f"passkey filler: {len(filler)} tokens ({', '.join(str(p.relative_to(ROOT)) for p in FILLER)})")

    rng = random.Random(args.seed)
    if not args.no_check:
        ids, _ = build_prompt(full, filler, nl_ok, 1024, 0.5, 12345, 0)
        check_against_generate(full, ids, args.new_tokens, [None], "full")
        check_against_generate(warm, ids, args.new_tokens, sparse_list, "warm-int8")
    out("")

    # ---- perplexity
    ppl_res = {}
    for name in args.ppl_docs:
        files, note = PPL_DOCS[name]
        text = "\n\n".join(p.read_text() for p in files)
        ids = full.encode(text)
        if args.ppl_max:
            ids = ids[: args.ppl_max]
        rf = perplexity(full, ids)
        rw = perplexity(warm, ids)
        d = (rw["logprobs"] - rf["logprobs"]).abs()
        ppl_res[name] = {"source": note, "full": {k: v for k, v in rf.items() if k != "logprobs"},
                         "warm-int8": {k: v for k, v in rw.items() if k != "logprobs"},
                         "rel_change": rw["ppl"] / rf["ppl"] - 1,
                         "rel_change_pos_ge_2048": (rw["ppl_pos_ge_2048"] / rf["ppl_pos_ge_2048"] - 1)
                         if rf["ppl_pos_ge_2048"] else None,
                         "max_abs_logprob_diff": float(d.max()), "mean_abs_logprob_diff": float(d.mean())}
        out(f"ppl {name}: {len(ids)} tokens; full {rf['ppl']:.4f} ({rf['seconds']:.0f}s), warm-int8 {rw['ppl']:.4f} "
            f"({rw['seconds']:.0f}s; {rw['warm_blocks']} of {rw['hot_blocks'] + rw['warm_blocks']} global-group "
            f"block-table entries warm at the end, expected {rw['expected_warm']}, warm pool used {rw['warm_pool_used']})")

    # ---- passkey
    trials = []
    stopped = False
    for length in args.lengths:
        for depth in args.depths:
            for _ki in range(args.keys):
                key = rng.randint(10000, 99999)
                start = rng.randrange(len(filler))
                if args.max_minutes and time.perf_counter() - t_all > 60 * args.max_minutes:
                    stopped = True
                    continue
                ids, at = build_prompt(full, filler, nl_ok, length, depth, key, start)
                rf, cf, tf = run_prompt(full, ids, args.new_tokens, [None])
                rw, cw, tw = run_prompt(warm, ids, args.new_tokens, sparse_list)
                answers = {"full": rf[None], "warm-int8": rw[None]}
                for k in args.sparse_top_k:
                    answers[f"sparse-k{k}"] = rw[k]
                texts = {m: full.tokenizer.decode(t, skip_special_tokens=True) for m, t in answers.items()}
                ok = {m: str(key) in texts[m] for m in modes}
                same = {m: answers[m] == answers["full"] for m in modes}
                trials.append({"length": length, "depth": depth, "key": key, "filler_start": start, "needle_token": at,
                               "answers": texts, "answer_ids": answers, "correct": ok, "same_as_full": same,
                               "prefill_s": {"full": tf, "warm-int8": tw}, "warm_blocks": cw["warm_blocks"],
                               "expected_warm": cw["expected_warm"], "hot_blocks": cw["hot_blocks"]})
                out(f"L={length:5d} d={depth:.1f} key={key} warm {cw['warm_blocks']}/{cw['expected_warm']} blocks "
                    f"prefill {tf:.1f}s/{tw:.1f}s | " + " ".join(f"{m}:{'Y' if ok[m] else 'n'}" for m in modes)
                    + f" | full {texts['full']!r}"
                    + "".join(f" {m} {texts[m]!r}" for m in modes[1:] if not same[m]))

    # ---- tables
    out("")
    if stopped:
        out(f"NOTE: --max-minutes {args.max_minutes} reached: later passkey trials were not run; "
            "the tables count only the trials above")
    out("Needle (passkey) accuracy: correct / trials, per mode and prompt length "
        f"(depths {args.depths}, {args.keys} keys each); [answers token-identical to full]")
    head = f"{'mode':<12}" + "".join(f"{L:>14}" for L in args.lengths) + f"{'all':>14}"
    out(head)
    summary: dict = {}
    for m in modes:
        row, srow = f"{m:<12}", {}
        for L in [*args.lengths, None]:
            ts = [t for t in trials if L is None or t["length"] == L]
            c = sum(t["correct"][m] for t in ts)
            s = sum(t["same_as_full"][m] for t in ts)
            row += f"{f'{c}/{len(ts)} [{s}]':>14}"
            srow[str(L or "all")] = {"correct": c, "trials": len(ts), "same_as_full": s}
        summary[m] = srow
        out(row)
    out("")
    out("Needle accuracy per depth (all lengths):")
    out(f"{'mode':<12}" + "".join(f"{d:>10}" for d in args.depths))
    for m in modes:
        cells = []
        for d in args.depths:
            ts = [t for t in trials if t["depth"] == d]
            cells.append(f"{sum(t['correct'][m] for t in ts)}/{len(ts)}")
        out(f"{m:<12}" + "".join(f"{c:>10}" for c in cells))
    if trials:
        out("")
        out("Warm blocks at the end of each needle prefill (global group; 3 layers share one table): "
            + ", ".join(f"L={L}: {sorted({t['warm_blocks'] for t in trials if t['length'] == L})} of "
                        f"{sorted({t['warm_blocks'] + t['hot_blocks'] for t in trials if t['length'] == L})}"
                        for L in args.lengths))
    out("")
    out("Perplexity (chunked prefill, see the docstring); sparse modes: no perplexity (decode only)")
    out(f"{'text':<9}{'tokens':>7}{'full':>10}{'warm-int8':>11}{'change':>9}{'   pos>=2048: full':>19}{'warm':>9}"
        f"{'change':>9}{'max|dlogp|':>12}{'warm blocks':>13}")
    for name, r in ppl_res.items():
        f, w = r["full"], r["warm-int8"]
        tail = (f"{f['ppl_pos_ge_2048']:>19.4f}{w['ppl_pos_ge_2048']:>9.4f}{100 * r['rel_change_pos_ge_2048']:>8.3f}%"
                if f["ppl_pos_ge_2048"] else f"{'-':>19}{'-':>9}{'-':>9}")
        out(f"{name:<9}{f['tokens']:>7}{f['ppl']:>10.4f}{w['ppl']:>11.4f}{100 * r['rel_change']:>8.3f}%{tail}"
            f"{r['max_abs_logprob_diff']:>12.4f}{w['warm_blocks']:>6}/{w['hot_blocks'] + w['warm_blocks']}")
    for name, r in ppl_res.items():
        out(f"  {name}: {r['source']}")
    out("")
    bar_ppl = all(r["rel_change"] <= 0.01 for r in ppl_res.values()) if ppl_res else None
    bar_needle = (summary["warm-int8"]["all"]["correct"] >= summary["full"]["all"]["correct"]
                  and all(t["correct"]["warm-int8"] or not t["correct"]["full"] for t in trials)) if trials else None
    out(f"Bars: warm-int8 perplexity <= +1%: {bar_ppl}; warm-int8 loses no needle the full mode finds: {bar_needle}")
    out(f"total time: {time.perf_counter() - t_all:.0f}s")
    if args.json:
        args.json.write_text(json.dumps({
            "config": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
            "header": LOG[:4], "perplexity": ppl_res, "needle_summary": summary, "trials": trials,
            "bars": {"ppl_le_1pct": bar_ppl, "no_needle_lost": bar_needle}}, indent=1))


if __name__ == "__main__":
    main()
