"""N questions over one document on the engine: the prefix cache against document placement.

Both submit the N questions together so the scheduler batches their decodes:
- prefix: `LLM.generate_shared`: [instructions + document] is prefilled once (up to its last block
  boundary, where every request cuts its prefill), then the N full prompts run together, each
  taking those blocks by reference and computing the head's last partial block and its question
  (before 2026-12-04 this took the document only up to the last prefill-chunk boundary);
- placement: `LLM.generate_with_document_batch` computes [BOS] + document once and places its KV
  behind the instructions of every request (engine/kv/document_cache.py; an approximation).

    python benchmarks/bench_llm_layer.py --doc data/samples/contracts/en-commonpaper-csa-1.0-to-1.1/v1.txt \
        --doc-tokens 2500 --questions 6 --max-tokens 16
"""

from __future__ import annotations

import argparse
import json
import time

QUESTIONS = ["Which law governs this agreement?", "How long is the notice period?", "Who pays the fees?",
             "Can either party terminate for convenience?", "What is the liability cap?",
             "Is there a confidentiality obligation?", "Where are disputes resolved?", "What are the payment terms?"]
INSTR = "Read the document and answer the question after it.\n\nDocument:\n"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--doc", required=True)
    ap.add_argument("--doc-tokens", type=int, default=2500)
    ap.add_argument("--questions", type=int, default=6)
    ap.add_argument("--max-tokens", type=int, default=16)
    ap.add_argument("--first", choices=("prefix", "placement"), default="placement")
    ap.add_argument("--only", choices=("prefix", "placement"), default=None, help="run one strategy (a process each)")
    ap.add_argument("--one-by-one", type=int, default=2, help="questions also run one after another (0: none)")
    args = ap.parse_args()
    from engine import LLM, SamplingParams, SchedulerConfig

    llm = LLM(device="cpu", dtype="float32", max_model_len=8192, scheduler=SchedulerConfig(max_num_seqs=8))
    text = open(args.doc, encoding="utf-8").read()
    ids = llm.encode(text, add_special_tokens=False)[: args.doc_tokens]
    doc = llm.decode(ids)
    qs = [f"\n\nQuestion: {q}\nAnswer:" for q in (QUESTIONS * 4)[: args.questions]]
    params = SamplingParams(max_tokens=args.max_tokens)
    res = {"doc_tokens": len(ids), "questions": len(qs), "max_tokens": args.max_tokens}

    def prefix():
        llm.clear_prefix_cache()
        t0, c0 = time.perf_counter(), time.process_time()
        outs = llm.generate_shared(INSTR + doc, qs, params)  # the head's blocks shared by reference
        res["prefix_s"] = round(time.perf_counter() - t0, 2)
        res["prefix_cpu_s"] = round(time.process_time() - c0, 2)
        res["prefix_cached_tokens"] = [o.cached_tokens for o in outs]
        return outs

    def placement():
        llm.clear_prefix_cache()
        t0, c0 = time.perf_counter(), time.process_time()
        outs = llm.generate_with_document_batch(INSTR, doc, qs, params)
        res["placement_s"] = round(time.perf_counter() - t0, 2)
        res["placement_cpu_s"] = round(time.process_time() - c0, 2)
        res["placement_document_s"] = round(outs[0].metrics["document_s"], 2)
        return outs

    if args.only is not None:
        outs = prefix() if args.only == "prefix" else placement()
        res["answers"] = [o.text for o in outs]
        print(json.dumps(res))
        return
    if args.first == "placement":
        outs2, outs = placement(), prefix()
    else:
        outs, outs2 = prefix(), placement()
    res["same_answers"] = sum(a.text == b.text for a, b in zip(outs, outs2, strict=True))

    llm.clear_prefix_cache()
    t0 = time.perf_counter()
    for q in qs[: args.one_by_one]:
        llm.generate(INSTR + doc + q, params)
    res[f"one_by_one_{args.one_by_one}_s"] = round(time.perf_counter() - t0, 2)
    print(json.dumps(res))


if __name__ == "__main__":
    main()
