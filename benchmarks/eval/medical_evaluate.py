"""Scoring the medical pipeline against the truth files in tests/fixtures/medical/ (copied from the
shared corpus, provenance in PROVENANCE.md). Used by the tests and runnable as a script:

    python -m benchmarks.eval.medical_evaluate [--no-embeddings] [--llm off|auto|on]   # prints every number

Metrics
- Synthea: entity F1 (exact span and coarse type: condition / medication / procedure /
  immunization), assertion accuracy on the conditions (template slot "presenting" -> present,
  "history of" -> historical), date normalisation accuracy (the entity's normalised date equals the
  truth timeline date), evidence-in-top-3 (the truth evidence sentence among the top 3 supporting
  sentences for the conclusion).
- CMB-Clin (Chinese): section heading F1 (label and start), vital-sign F1 (exact span),
  relative-time F1 (exact span) and whether each is left unanchored (the notes carry no date).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FIX = ROOT / "tests" / "fixtures" / "medical"

TRUTH_TYPE = {"presenting": "condition", "history": "condition", "prescribed": "medication",
              "active_medication": "medication", "procedure": "procedure", "careplan": "procedure",
              "immunization": "immunization"}
OUR_TYPE = {"problem": "condition", "symptom": "condition", "medication": "medication", "procedure": "procedure",
            "immunization": "immunization"}


def synthea_patients() -> list[Path]:
    return sorted(p for p in FIX.glob("synthea-*") if (p / "truth.json").exists())


def _f1(tp: int, fp: int, fn: int) -> dict:
    p = tp / (tp + fp) if tp + fp else 0.0
    r = tp / (tp + fn) if tp + fn else 0.0
    return {"tp": tp, "fp": fp, "fn": fn, "precision": p, "recall": r, "f1": 2 * p * r / (p + r) if p + r else 0.0}


def score_synthea(pipe, llm=None, limit: int | None = None, per_patient: list | None = None) -> dict:
    """llm: None (rules only) or a function returning a fresh pipelines.llm.LLMRun per patient (the
    medical LLM steps); limit: the first N patients; per_patient: filled with each patient's time and
    LLM steps."""
    import time

    tp = fp = fn = 0
    a_ok = a_n = d_ok = d_n = e_ok = e_n = 0
    misses: list[str] = []
    for folder in synthea_patients()[:limit]:
        truth = json.loads((folder / "truth.json").read_text(encoding="utf-8"))
        inp = pipe.discover(folder)[0]
        t0 = time.perf_counter()
        result = pipe.run_input(inp, llm=llm() if llm is not None else None)
        if per_patient is not None:
            per_patient.append({"patient": folder.name, "documents": len(result.documents),
                                "seconds": round(time.perf_counter() - t0, 1),
                                "context": result.llm_context.strategy if result.llm_context else None,
                                "context_tokens": result.llm_context.tokens if result.llm_context else None,
                                "steps": [s.model_dump(include={"step", "ran", "seconds", "requests", "prompt_tokens",
                                                                "generated_tokens", "reuse", "error"})
                                          for s in (result.llm.steps if result.llm else [])]})
        by_span = {(e.doc_id, e.span.char_start, e.span.char_end): e for e in result.entities}
        got = {(e.doc_id, e.span.char_start, e.span.char_end, OUR_TYPE[e.type]) for e in result.entities if e.type in OUR_TYPE}
        want = {(t["doc"].split("/")[-1], t["start"], t["end"], TRUTH_TYPE[t["type"]]) for t in truth["entities"]}
        tp += len(got & want)
        fp += len(got - want)
        fn += len(want - got)
        for t in truth["entities"]:
            if t["type"] not in ("presenting", "history"):
                continue
            a_n += 1
            e = by_span.get((t["doc"].split("/")[-1], t["start"], t["end"]))
            expected = "historical" if t["type"] == "history" else "present"
            a_ok += bool(e and e.assertion == expected)
        for t in truth["timeline"]:
            d_n += 1
            e = by_span.get((t["doc"].split("/")[-1], t["start"], t["end"]))
            d_ok += bool(e and e.time and e.time.start and e.time.start[:10] == t["date"])
        targets = {e.id: e for e in result.entities}
        for ch in truth["evidence_chains"]:
            e_n += 1
            c = ch["conclusion"]
            tgt = by_span.get((c["doc"].split("/")[-1], c["start"], c["end"]))
            ev = None
            if tgt is not None:
                ev = next((x for x in result.evidence if x.target == tgt.id), None) or next(
                    (x for x in result.evidence if x.target and targets[x.target].concept == tgt.concept), None)
            doc = ch["evidence"]["doc"].split("/")[-1]
            s, e = ch["evidence"]["sentence_span"]
            ok = ev is not None and any(it.doc_id == doc and it.span.char_start < e and s < it.span.char_end
                                        for it in ev.supporting[:3])
            e_ok += ok
            if not ok:
                misses.append(f"{folder.name}: {c['text']}")
    return {"entities": _f1(tp, fp, fn), "assertion_accuracy": a_ok / a_n, "assertion_n": a_n,
            "date_accuracy": d_ok / d_n, "date_n": d_n, "evidence_top3": e_ok / e_n, "evidence_n": e_n,
            "evidence_misses": misses}


def score_cmbclin(pipe) -> dict:
    from pipelines.documents import load_document

    folder = FIX / "zh-cmbclin-sample"
    truth = json.loads((folder / "truth.json").read_text(encoding="utf-8"))
    sec = [0, 0, 0]
    vit = [0, 0, 0]
    rel = [0, 0, 0]
    unanchored = n_rel = 0
    for d in truth["documents"]:
        doc = load_document(folder / d["file"])
        result = pipe.run_documents([doc])
        out = result.documents[0]
        got = {(s.label, s.heading.char_start) for s in out.sections}
        want = {(s["label"], s["start"]) for s in d["sections"]}
        _acc(sec, got, want)
        got = {(e.span.char_start, e.span.char_end) for e in result.entities if e.type == "vital"}
        want = {tuple(e["span"]) for e in d["entities"] if e["type"] == "vital_sign"}
        _acc(vit, got, want)
        rel_times = [t for t in result.times if t.kind in ("document_relative", "duration", "anchored")]
        got = {(t.span.char_start, t.span.char_end) for t in rel_times}
        want = {tuple(e["span"]) for e in d["entities"] if e["type"] == "relative_time"}
        _acc(rel, got, want)
        for t in rel_times:
            n_rel += 1
            unanchored += t.time.anchored_to == "unanchored" and t.time.start is None
    return {"sections": _f1(*sec), "vital_signs": _f1(*vit), "relative_times": _f1(*rel),
            "relative_unanchored_share": unanchored / n_rel if n_rel else 0.0, "relative_n": n_rel}


def _acc(acc: list[int], got: set, want: set) -> None:
    acc[0] += len(got & want)
    acc[1] += len(got - want)
    acc[2] += len(want - got)


if __name__ == "__main__":
    from pipelines.medical import MedicalPipeline

    emb = "--no-embeddings" not in sys.argv
    mode = sys.argv[sys.argv.index("--llm") + 1] if "--llm" in sys.argv else "off"
    run = None
    if mode != "off":  # the medical LLM steps with the default model (benchmarks/eval/medical_llm.py prints more)
        from pipelines.llm import EngineSettings, LLMRun, get_engine

        engine = get_engine(EngineSettings())
        run = lambda: LLMRun(mode, engine=engine)  # noqa: E731
    print(json.dumps({"synthea": score_synthea(MedicalPipeline(use_embeddings=emb), llm=run),
                      "cmbclin": score_cmbclin(MedicalPipeline(use_embeddings=emb))}, indent=2, ensure_ascii=False))
