"""Review-table throughput (issue 17): D documents of N tokens x Q questions, each document's
questions submitted together with its KV computed once, against one `generate` call per cell.

    python3 benchmarks/bench_review_gpu.py --out review.json [--models llama8b] [--docs 100]
        [--doc-tokens 8000] [--questions 5] [--max-tokens 32] [--baseline-docs 20] [--review-docs 10] [--tiny]

Models: random bf16 weights in real shapes (benchmarks/bench_engine_gpu.py's configs; default the
Llama-3-8B shape), saved as an HF folder with the word-level tokenizer of
benchmarks/bench_pipeline_batch_gpu.py (a text of N words is N tokens), loaded through
`pipelines.llm.get_engine` with the default settings (`--max-num-seqs` to set it; the default on
CUDA is 64).

Ways, each timed after a warm-up on other documents of the same shapes:
  batched        for each document, `ask_document(llm, doc, Q questions, strategy="placement")`: one
                 batch, the document's KV computed once and placed (copied) behind the instructions
                 of every request (what `longdoc batch --ask` submits per document, without the
                 attribution pass);
  shared         the same with strategy="prefix" (`LLM.generate_shared`: [instructions + document]
                 computed once, its blocks shared by reference);
  shared_xG      G documents per submission through the engine API (`LLM.generate_shared_batch`:
                 the G heads computed together, then all G x Q requests together, decodes batched
                 across documents; not yet what `longdoc batch --ask` submits);
  per_cell       one `llm.generate(instructions + document + question)` per cell, in turn, engine
                 defaults (the prefix cache on: a document's later questions reuse its full chunks);
  per_cell_no_reuse  the same with the prefix cache cleared before each cell (every cell computes
                 its document);
  review         the review path itself: `LLMRun.ask([doc], questions)` with attribution (the
                 answer's attention over the document's sentences, for the spans and the confidence);
  review_xG      the review path of `longdoc batch --ask` with G inputs to a worker (`--group`):
                 `LLMRun.ask_many` over G documents at a time, with attribution.
per_cell, per_cell_no_reuse and review run on the first --baseline-docs / --review-docs documents
(their cost per cell does not depend on how many documents there are); every way is reported as
cells per second and seconds per document, and batched's speed-up over each is the ratio of cells
per second. `--tiny` is a CPU smoke test (toy shapes, 4 documents of 300 tokens x 3 questions).
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.bench_engine_gpu import hf_configs  # noqa: E402
from benchmarks.bench_pipeline_batch_gpu import now, save_folder, words  # noqa: E402


def serve(llm, docs: list[str], questions: list[str], max_tokens: int, how: str) -> dict:
    from engine import SamplingParams
    from pipelines.documents import Document
    from pipelines.llm import INSTRUCTIONS, QUESTION, STOP, LLMRun, ask_document

    gen = errors = 0
    t = now()
    if how.startswith("shared_x"):  # several documents per submission, through the engine API
        g = int(how[len("shared_x"):])
        params = SamplingParams(max_tokens=max_tokens, stop=list(STOP))
        suffixes = [QUESTION.format(question=q) for q in questions]
        for lo in range(0, len(docs), g):
            outs = llm.generate_shared_batch([(INSTRUCTIONS + text, suffixes) for text in docs[lo:lo + g]], params)
            gen += sum(len(o.token_ids) for group in outs for o in group)
    if how.startswith("review_x"):  # the batch's review path: G inputs per worker call, with attribution
        g = int(how[len("review_x"):])
        run = LLMRun("off", engine=llm)
        for lo in range(0, len(docs), g):
            jobs = [(Document.from_text(text, doc_id=f"doc{lo + k}"), questions) for k, text in enumerate(docs[lo:lo + g])]
            for answers in run.ask_many(jobs, max_tokens=max_tokens):
                errors += sum(a.error is not None and "empty answer" not in a.error for a in answers)
                gen += sum(len(llm.encode(a.text, add_special_tokens=False)) for a in answers)
    for k, text in enumerate(docs if not how.startswith(("shared_x", "review_x")) else []):
        doc = Document.from_text(text, doc_id=f"doc{k}")
        if how in ("batched", "shared"):
            res = ask_document(llm, doc, questions, max_tokens=max_tokens,
                               strategy="placement" if how == "batched" else "prefix")
            gen += sum(len(it.token_ids) for it in res.items)
            errors += sum(it.error is not None for it in res.items)
        elif how == "review":
            run = LLMRun("off", engine=llm)
            answers = run.ask([doc], questions, max_tokens=max_tokens)
            errors += sum(a.error is not None and "empty answer" not in a.error for a in answers)
            gen += sum(len(llm.encode(a.text, add_special_tokens=False)) for a in answers)
        else:
            params = SamplingParams(max_tokens=max_tokens, stop=list(STOP))
            for q in questions:
                if how == "per_cell_no_reuse":
                    llm.clear_prefix_cache()
                out = llm.generate(INSTRUCTIONS + text + QUESTION.format(question=q), params)[0]
                gen += len(out.token_ids)
    dt = now() - t
    cells = len(docs) * len(questions)
    return {"seconds": dt, "documents": len(docs), "cells": cells, "generated_tokens": gen, "errors": errors,
            "cells_per_s": cells / dt, "seconds_per_document": dt / len(docs), "gen_tok_per_s": gen / dt}


def run_model(name: str, cfg, dev: str, args, log) -> dict:
    from pipelines.llm import EngineSettings, forget_engines, get_engine

    res: dict = {k: getattr(args, k) for k in ("docs", "doc_tokens", "questions", "max_tokens", "baseline_docs",
                                                "review_docs")}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / name
        save_folder(cfg, folder, dev)
        t0 = time.perf_counter()
        llm = get_engine(EngineSettings(model=str(folder), device=dev, max_num_seqs=args.max_num_seqs))
        res["load_s"] = time.perf_counter() - t0
        rng = random.Random(0)
        docs = [words(rng, args.doc_tokens, cfg.vocab_size) for _ in range(args.docs)]
        warm = [words(rng, args.doc_tokens, cfg.vocab_size) for _ in range(2)]
        qs = [f"question {k} {words(rng, 12, cfg.vocab_size)}" for k in range(args.questions)]
        plan = {"batched": docs, "shared": docs, f"shared_x{args.group}": docs, "per_cell": docs[: args.baseline_docs],
                "per_cell_no_reuse": docs[: args.baseline_docs], "review": docs[: args.review_docs],
                f"review_x{args.group}": docs[: max(args.review_docs, args.group)]}
        alias = {"shared_x": f"shared_x{args.group}", "review_x": f"review_x{args.group}"}
        chosen = {alias.get(w, w) for w in args.ways.split(",")} if args.ways else set(plan)
        for how, subset in plan.items():
            if not subset or how not in chosen:
                continue
            w = serve(llm, warm, qs, args.max_tokens, how)
            log(f"  {name} {how}: warm-up {w['seconds']:.2f} s")
            llm.clear_prefix_cache()
            r = serve(llm, subset, qs, args.max_tokens, how)
            res[how] = r
            log(f"  {name} {how}: {r['documents']} documents x {len(qs)} questions in {r['seconds']:.2f} s: "
                f"{r['cells_per_s']:.2f} cells/s, {r['seconds_per_document']:.3f} s/document, errors {r['errors']}")
        for way in ("batched", "shared", f"shared_x{args.group}", "review", f"review_x{args.group}"):
            for base in ("per_cell", "per_cell_no_reuse", "review"):
                if base in res and way in res and base != way:
                    res[f"{way}_speedup_vs_{base}"] = res[way]["cells_per_s"] / res[base]["cells_per_s"]
                    log(f"  {name} {way} vs {base}: {res[f'{way}_speedup_vs_{base}']:.1f}x cells/s")
        res["settings"] = {"max_num_seqs": llm.scheduler_config.max_num_seqs,
                           "max_prefill_chunk": llm.scheduler_config.max_prefill_chunk, "kv_cache_bytes": llm.kv.bytes}
        res["counters"] = llm.counters().to_dict()
        del llm
        forget_engines()
        gc.collect()
        torch.cuda.empty_cache() if dev == "cuda" else None
    return res


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default="llama8b")
    ap.add_argument("--out", default="review.json")
    ap.add_argument("--docs", type=int, default=100)
    ap.add_argument("--doc-tokens", type=int, default=8000)
    ap.add_argument("--questions", type=int, default=5)
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--baseline-docs", type=int, default=20)
    ap.add_argument("--review-docs", type=int, default=10)
    ap.add_argument("--ways", default="", help="comma-separated ways to run (default all; shared_x for shared_xG)")
    ap.add_argument("--group", type=int, default=8, help="documents per submission in the shared_xG and review_xG ways")
    ap.add_argument("--max-num-seqs", type=int, default=None, help="the engine's; default EngineSettings' (64 on CUDA)")
    ap.add_argument("--tiny", action="store_true")
    args = ap.parse_args()
    dev = "cuda" if torch.cuda.is_available() and not args.tiny else "cpu"
    cfgs = hf_configs(args.tiny)
    if args.tiny:
        args.docs, args.doc_tokens, args.questions, args.max_tokens = min(args.docs, 4), min(args.doc_tokens, 300), \
            min(args.questions, 3), 4
        args.baseline_docs, args.review_docs = min(args.baseline_docs, 2), min(args.review_docs, 2)
    out: dict = {"device": torch.cuda.get_device_name() if dev == "cuda" else "cpu", "torch": torch.__version__,
                 "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "models": {}}
    for name in args.models.split(","):
        print(f"== {name}", flush=True)
        out["models"][name] = run_model(name, cfgs[name], dev, args, lambda m: print(m, flush=True))
        Path(args.out).write_text(json.dumps(out, indent=2, default=str))


if __name__ == "__main__":
    main()
