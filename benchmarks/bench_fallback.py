"""Benchmark: a request twice as long as the context, served through every fallback strategy by the
real Gemma 3 270M (engine.fallback).

    python benchmarks/bench_fallback.py [--context 32768] [--doc-tokens N] [--depth 0.35]
        [--strategies error truncate:head truncate:tail truncate:middle retrieval map_reduce]
        [--dtype float32] [--max-tokens 16] [--json out.json]

The document: the English public texts of the shared corpus (../shared/corpus beside the checkout, or $LONGDOC_CORPUS: Common Paper and
GitHub agreements, US patent claims, Synthea and curated clinical notes; provenance in its
README) and of the repo's data/samples, joined in a fixed order with a heading per file, repeated
if they are too short, cut to `--doc-tokens` (default 2 x context) at a paragraph start. One
planted fact — "The vault access code of the Harwick Archive is 4817-2209." — is inserted as its own
paragraph at `--depth` (share of the document before it), and the question asks for it. With a
document of twice the context, truncation keeps about half: at the default depth 0.35 dropping the
tail keeps the fact, dropping the head or the middle loses it (any depth favours one side).

Printed per strategy: wall time (fit + generation), document tokens dropped, chunks used / total,
key-entity retention (entities kept / total), whether the planted fact was in what the model saw
(for map-reduce: in any chunk), whether the answer holds the code, and the answer.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

FACT = "The vault access code of the Harwick Archive is 4817-2209."
CODE = "4817-2209"
INSTRUCTIONS = "Below is a collection of documents. Read them and answer the question at the end.\n\n"
QUESTION = "\n\nQuestion: What is the vault access code of the Harwick Archive?\nAnswer:"
STRATEGIES = ["error", "truncate:head", "truncate:tail", "truncate:middle", "retrieval", "map_reduce"]


def source_files() -> list[Path]:
    """English plain-text sources in a fixed order (shared corpus first, then the repo's samples)."""
    corpus = Path(os.environ.get("LONGDOC_CORPUS", ROOT.parent / "shared" / "corpus"))
    files: list[Path] = []
    if corpus.is_dir():
        for name in ("en-commonpaper-csa-1.0-to-1.1", "en-commonpaper-dpa-1.0-to-1.1", "en-github-tos-2017-10-to-2018-05"):
            files += sorted((corpus / "contracts" / name).glob("v*.txt"))
        files += sorted((corpus / "patents").glob("US*.txt"))
        files += sorted((corpus / "medical").glob("synthea-*/notes/*.txt"))
        files += sorted((corpus / "medical" / "curated-no-truth").glob("*.txt"))
    samples = ROOT / "data" / "samples"
    files += sorted((samples / "patents").glob("US*.txt"))
    files += sorted((samples / "medical").glob("en-*/*.txt")) + sorted((samples / "medical").glob("synthea-*/*.txt"))
    return files


def build_document(llm, n_tokens: int, depth: float) -> tuple[str, int]:
    """(document text with the planted fact, number of times the sources were repeated)."""
    parts, total, rounds = [], 0, 0
    files = source_files()
    if not files:
        raise SystemExit("no source texts found (../shared/corpus, $LONGDOC_CORPUS or data/samples)")
    while total < n_tokens * 1.05:
        rounds += 1
        for f in files:
            text = f.read_text(encoding="utf-8", errors="replace").strip()
            parts.append(f"=== {f.name} ===\n\n{text}")
            total += len(llm.encode(text, add_special_tokens=False)) + 8
            if total >= n_tokens * 1.05:
                break
    text = "\n\n".join(parts)
    enc = llm.tokenizer.encode_with_offsets(text, add_special_tokens=False)
    fact_tokens = len(llm.encode("\n\n" + FACT, add_special_tokens=False))
    cut = enc.offsets[min(n_tokens - fact_tokens, len(enc.ids) - 1)][0]
    para = text.rfind("\n\n", 0, cut)
    text = text[: para if para > cut // 2 else cut]
    at = text.find("\n\n", int(len(text) * depth))
    at = at if at >= 0 else len(text)
    return text[:at] + "\n\n" + FACT + text[at:], rounds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--context", type=int, default=32768, help="max_model_len of the engine")
    ap.add_argument("--doc-tokens", type=int, default=None, help="document length (default 2 x context)")
    ap.add_argument("--depth", type=float, default=0.35, help="where the planted fact goes (0..1)")
    ap.add_argument("--strategies", nargs="+", default=STRATEGIES)
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--max-tokens", type=int, default=16)
    ap.add_argument("--chunk-tokens", type=int, default=512, help="retrieval chunk size")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()

    import torch

    from engine import (
        LLM,
        CacheConfig,
        EngineError,
        FallbackPolicy,
        LongRequest,
        SamplingParams,
        run_with_fallback,
    )
    from pipelines.text.fallback_tools import PipelineTextTools

    t0 = time.perf_counter()
    kv_bytes = max(256 * 2**20, args.context * 3 * 256 * 2 * 4 * 2)  # global layers' K+V in fp32, x2 headroom
    llm = LLM(device=args.device, dtype=args.dtype, cache=CacheConfig(memory_budget=kv_bytes),
              max_model_len=args.context)
    load_s = time.perf_counter() - t0
    n_doc = args.doc_tokens or 2 * args.context
    doc, rounds = build_document(llm, n_doc, args.depth)
    req = LongRequest(document=doc, question=QUESTION, instructions=INSTRUCTIONS)
    params = SamplingParams(max_tokens=args.max_tokens, stop=["\n"])
    info = {
        "context": args.context, "doc_tokens_target": n_doc, "depth": args.depth, "dtype": args.dtype,
        "device": args.device, "threads": torch.get_num_threads(), "source_rounds": rounds,
        "load_s": round(load_s, 1), "machine": platform.processor() or platform.machine(),
        "kv_tokens_per_seq": llm.kv.max_tokens_per_seq(),
    }
    print(json.dumps(info))
    rows = []
    for name in args.strategies:
        strategy, _, side = name.partition(":")
        policy = FallbackPolicy(strategy, truncate_side=side or "middle", chunk_tokens=args.chunk_tokens)
        t = time.perf_counter()
        row: dict = {"strategy": name}
        try:
            out, rep = run_with_fallback(llm, req, policy, params, PipelineTextTools())
        except EngineError as exc:
            row.update(seconds=round(time.perf_counter() - t, 2), error=f"{type(exc).__name__}: {exc}")
            rows.append(row)
            print(f"{name:16s} {row['seconds']:8.1f}s  raised {row['error']}", flush=True)
            continue
        seconds = time.perf_counter() - t
        if strategy == "map_reduce":
            fact_seen = any(CODE in doc[c.char_start : c.char_end] for c in rep.chunks)
        else:
            fact_seen = any(CODE in doc[a:b] for a, b in rep.kept_spans)
        row.update(
            seconds=round(seconds, 1), fit_s=round(rep.fit_seconds, 2), generate_s=round(rep.generate_seconds, 1),
            prompt_tokens=rep.prompt_tokens, document_tokens=rep.document_tokens, tokens_dropped=rep.tokens_dropped,
            prompt_tokens_sent=rep.prompt_tokens_sent, chunks_used=rep.chunks_used, chunks_total=rep.chunks_total,
            key_entity_retention=round(rep.key_entity_retention, 3), entities_kept=rep.entities_kept,
            entities_total=rep.entities_total, retrieval_method=rep.retrieval_method, fact_seen=fact_seen,
            answer=out.text, answer_correct=CODE in out.text, reduce_tokens_dropped=rep.reduce_tokens_dropped,
            partial_answers=[c.answer for c in rep.chunks] if strategy == "map_reduce" else None,
        )
        rows.append(row)
        print(
            f"{name:16s} {seconds:8.1f}s  dropped {rep.tokens_dropped:6d}/{rep.document_tokens}  "
            f"chunks {rep.chunks_used}/{rep.chunks_total}  retention {rep.key_entity_retention:.3f} "
            f"({rep.entities_kept}/{rep.entities_total})  fact seen {fact_seen!s:5s}  "
            f"correct {CODE in out.text!s:5s}  answer {out.text!r}",
            flush=True,
        )
    if args.json:
        args.json.write_text(json.dumps({"info": info, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
