"""Benchmark: document reuse at any position (engine/kv/document_cache.py) against a full recompute, on the
real default model (Gemma 3 270M GGUF), CPU, float32.

    OMP_NUM_THREADS=1 python benchmarks/bench_doc_reuse.py [--doc-tokens 3000] [--threads 1]
                                                                 [--reps 3] [--json out.json]

Document: the first `--doc-tokens` tokens (cut at a line end) of GitHub's Terms of Service,
2017-10 version (data/samples/contracts/en-github-tos-2017-10-to-2018-05/v1.txt, CC0 1.0).

1. Logits. For several instruction prefixes (BOS only: the exact case; a short task line; a chat
   turn; a ~150-token policy preamble), the logits of every position of a fixed question after
   [instructions][document] with the document placed (LLM.document_logits: computed once as
   [BOS]+document, keys re-rotated) and with the whole prompt computed normally
   (LLM.prompt_logits). Reported: max |diff|, that over max |logit| of the full run (relative),
   mean |diff|, mean KL(full || reuse) in nats, top-1 agreement over the question's positions,
   and how many of 16 greedy answer tokens agree before the first difference.
2. Needle. A pass key (5 digits) hidden at 10%, 50% and 90% of the document; the question asks
   for it; greedy answer (8 tokens) with reuse and with a full recompute, two instruction
   prefixes; correct when the digits appear in the answer.
3. TTFT of a second question. The document is in the store (computed for a first question);
   a second question behind *different* instructions: reuse (load + place + question prefill)
   vs a full prefill (prefix cache cleared, so nothing is served); and, for context, the prefix
   cache's own best case, the same instructions as the first question (served up to the last
   1,024-token chunk boundary before the question). Also the first question's TTFT with reuse
   (computing the document included). Median of `--reps`; every TTFT counts from the call
   (GenerationOutput.metrics['ttft_s']), the prompt already tokenized.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

DOC_PATH = ROOT / "data" / "samples" / "contracts" / "en-github-tos-2017-10-to-2018-05" / "v1.txt"

PREAMBLE = (
    "You are a careful assistant for legal professionals. The user will give you the complete text "
    "of an agreement. Read it closely before answering. Base every answer only on the words of the "
    "agreement: do not rely on outside knowledge, do not guess, and do not invent clauses, dates or "
    "numbers that the text does not contain. When the agreement is silent on a point, say so. When "
    "a clause has exceptions or conditions, state them. Quote the relevant sentence when it helps "
    "the reader to check your answer, and name the section it comes from. Keep answers short and "
    "plain: one to three sentences unless the question asks for a list. If the question is "
    "ambiguous, answer the most likely reading and say which reading you chose.\n\nAgreement:\n\n"
)
INSTRUCTIONS = {
    "bos-only": "",
    "task-line": "Read the following terms of service and answer the question.\n\n",
    "chat-turn": "<start_of_turn>user\nHere is a document. Answer my question about it.\n\n",
    "preamble-150": PREAMBLE,
}
QUESTION = "\n\nQuestion: What may GitHub do if a user violates these terms?\nAnswer:"
QUESTION_2 = "\n\nQuestion: Who owns the content that a user posts on GitHub?\nAnswer:"
NEEDLE_Q = "\n\nWhat is the secret pass key mentioned in the text above? The secret pass key is"


def document_text(llm, n_tokens: int) -> str:
    text = DOC_PATH.read_text()
    lines = text.splitlines(keepends=True)
    out, n = [], 0
    for line in lines:
        k = len(llm.encode(line, add_special_tokens=False))
        if n + k > n_tokens:
            break
        out.append(line)
        n += k
    return "".join(out)


def with_needle(doc: str, depth: float, key: str) -> str:
    cut = doc.find("\n", int(len(doc) * depth))
    cut = len(doc) if cut < 0 else cut + 1
    return doc[:cut] + f"The secret pass key is {key}. Remember it: the pass key is {key}.\n" + doc[cut:]


def logit_stats(full: torch.Tensor, reuse: torch.Tensor) -> dict:
    d = (full - reuse).abs()
    lp_f, lp_r = torch.log_softmax(full, -1), torch.log_softmax(reuse, -1)
    kl = (lp_f.exp() * (lp_f - lp_r)).sum(-1)
    return {
        "max_abs": d.max().item(),
        "rel": (d.max() / full.abs().max()).item(),
        "mean_abs": d.mean().item(),
        "kl_mean": kl.mean().item(),
        "kl_max": kl.max().item(),
        "top1": (full.argmax(-1) == reuse.argmax(-1)).float().mean().item(),
        "positions": full.shape[0],
    }


def common_prefix(a: list[int], b: list[int]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--doc-tokens", type=int, default=3000)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)

    from engine import LLM, CacheConfig, SamplingParams

    t_start = time.perf_counter()
    print(f"# {datetime.datetime.now(datetime.UTC).strftime('%Y-%m-%d %H:%M UTC')}  "
          f"command: OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', '?')} python benchmarks/bench_doc_reuse.py "
          + " ".join(sys.argv[1:]))
    print(f"# {platform.processor() or platform.machine()}, {os.cpu_count()} cores, torch {torch.__version__}, "
          f"threads {torch.get_num_threads()}, load average at start {os.getloadavg()[0]:.2f}")
    llm = LLM(device="cpu", dtype="float32", cache=CacheConfig(memory_budget=512 * 2**20), max_model_len=8192)
    print(f"# model {llm.model_path.name}, prefill chunk {llm.scheduler_config.max_prefill_chunk}, "
          f"doc store {type(llm.doc_tier().host).__name__} {llm.doc_tier().host.capacity_bytes / 2**30:.2f} GiB")
    doc = document_text(llm, args.doc_tokens)
    doc_ids = llm.encode(doc, add_special_tokens=False)
    q_ids = llm.encode(QUESTION, add_special_tokens=False)
    print(f"# document: {DOC_PATH.relative_to(ROOT)}, first {len(doc)} chars = {len(doc_ids)} tokens; "
          f"question {len(q_ids)} tokens")
    results: dict = {"doc_tokens": len(doc_ids), "question_tokens": len(q_ids), "logits": {}, "needle": [], "ttft": {}}

    # ------------------------------------------------------------------ 1. logits
    print("\n## 1. logits over the question's positions: reuse vs full recompute")
    print(f"{'instructions':<14} {'tokens':>6} {'max|d|':>8} {'rel':>8} {'mean|d|':>8} {'KL mean':>8} "
          f"{'KL max':>8} {'top-1':>6} {'greedy16':>8}")
    greedy = SamplingParams(max_tokens=16, ignore_eos=True)
    for name, instr in INSTRUCTIONS.items():
        i_ids = llm.encode(instr)
        ids = i_ids + doc_ids + q_ids
        reuse = llm.document_logits(i_ids, doc_ids, q_ids)
        full = llm.prompt_logits(ids, last=len(q_ids))
        st = logit_stats(full, reuse)
        a = llm.generate_with_document(i_ids, doc_ids, q_ids, greedy).token_ids
        b = llm.generate(ids, greedy)[0].token_ids  # prefix cache: bit-identical to a full prefill
        st["greedy16_agree"] = common_prefix(a, b)
        st["instr_tokens"] = len(i_ids)
        st["answer_reuse"], st["answer_full"] = llm.decode(a), llm.decode(b)
        results["logits"][name] = st
        print(f"{name:<14} {len(i_ids):>6} {st['max_abs']:>8.4f} {st['rel']:>8.5f} {st['mean_abs']:>8.5f} "
              f"{st['kl_mean']:>8.5f} {st['kl_max']:>8.5f} {st['top1']:>6.3f} {st['greedy16_agree']:>5}/16")
    for name, st in results["logits"].items():
        print(f"  {name}: reuse {st['answer_reuse']!r}\n  {' ' * len(name)}  full  {st['answer_full']!r}")
    print(f"  (document computed {llm.doc_cache.computed}x, loaded {llm.doc_cache.loaded}x)")

    # ------------------------------------------------------------------ 2. needle
    print("\n## 2. needle: pass key at a depth, greedy 8 tokens")
    nq_ids = llm.encode(NEEDLE_Q, add_special_tokens=False)
    eight = SamplingParams(max_tokens=8)
    g = torch.Generator().manual_seed(7)
    ok_r = ok_f = same = total = 0
    for depth in (0.1, 0.5, 0.9):
        key = str(int(torch.randint(10000, 99999, (1,), generator=g)))
        nd_ids = llm.encode(with_needle(doc, depth, key), add_special_tokens=False)
        for name in ("task-line", "preamble-150"):
            i_ids = llm.encode(INSTRUCTIONS[name])
            r = llm.generate_with_document(i_ids, nd_ids, nq_ids, eight)
            f = llm.generate(i_ids + nd_ids + nq_ids, eight)[0]
            cr, cf = key in r.text.replace(" ", ""), key in f.text.replace(" ", "")
            ok_r, ok_f, same, total = ok_r + cr, ok_f + cf, same + (r.token_ids == f.token_ids), total + 1
            results["needle"].append({"depth": depth, "key": key, "instructions": name, "reuse": r.text,
                                      "full": f.text, "reuse_ok": cr, "full_ok": cf})
            print(f"  depth {depth:.0%} key {key} {name:<13} reuse {'OK ' if cr else 'BAD'} {r.text!r:<28} "
                  f"full {'OK ' if cf else 'BAD'} {f.text!r}")
    print(f"  correct: reuse {ok_r}/{total}, full recompute {ok_f}/{total}; identical answers {same}/{total}")

    # ------------------------------------------------------------------ 3. TTFT
    print(f"\n## 3. TTFT (s), median of {args.reps}")
    one = SamplingParams(max_tokens=1)
    q2_ids = llm.encode(QUESTION_2, add_special_tokens=False)
    a_ids, b_ids = llm.encode(INSTRUCTIONS["task-line"]), llm.encode(INSTRUCTIONS["preamble-150"])
    ttft = {"reuse_first_question": [], "reuse_second_question": [], "full_prefill": [], "prefix_cache_same_instr": []}
    for _ in range(args.reps):
        llm.doc_tier().host.clear()  # the document is computed for the first question
        llm.clear_prefix_cache()
        out = llm.generate_with_document(a_ids, doc_ids, q_ids, one)
        assert out.metrics["document_loaded"] is False
        ttft["reuse_first_question"].append(out.metrics["ttft_s"])
        out = llm.generate_with_document(b_ids, doc_ids, q2_ids, one)  # different instructions, loaded
        assert out.metrics["document_loaded"] is True
        ttft["reuse_second_question"].append(out.metrics["ttft_s"])
        llm.clear_prefix_cache()
        out = llm.generate(b_ids + doc_ids + q2_ids, one)[0]
        assert out.cached_tokens == 0
        ttft["full_prefill"].append(out.metrics["ttft_s"])
        llm.clear_prefix_cache()
        llm.generate(a_ids + doc_ids + q_ids, one)
        out = llm.generate(a_ids + doc_ids + q2_ids, one)[0]
        ttft["prefix_cache_same_instr"].append(out.metrics["ttft_s"])
        results.setdefault("prefix_cached_tokens", out.cached_tokens)
    for k, v in ttft.items():
        results["ttft"][k] = {"median": statistics.median(v), "all": v}
        print(f"  {k:<26} {statistics.median(v):8.3f}   (runs: {', '.join(f'{x:.3f}' for x in v)})")
    print(f"  prefix cache, same instructions: {results['prefix_cached_tokens']} of "
          f"{len(a_ids) + len(doc_ids) + len(q2_ids)} prompt tokens served")
    sp = results["ttft"]["full_prefill"]["median"] / results["ttft"]["reuse_second_question"]["median"]
    print(f"  second question, different instructions: reuse is {sp:.1f}x faster than a full prefill")
    results["total_s"] = time.perf_counter() - t_start
    print(f"\n# total {results['total_s']:.0f} s, load average at end {os.getloadavg()[0]:.2f}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
