"""Scoring a `ReportResult` against a truth file (the corpus format: `targets` with kind, number,
page; `mentions` with page, text, bbox/boxes, `resolution` internal/external/ambiguous, `targets`).

- target detection: precision/recall/F1 of figure/table targets by (kind, number, page);
- mention-to-target accuracy over the truth mentions: a truth mention is matched to the predicted
  mention whose box overlaps it on the same page; an internal one is correct when the predicted
  targets are exactly the truth targets (a predicted mention covering several truth mentions,
  "Fig. 1 and Fig. 2", may carry the union of theirs); an external one is correct when nothing is
  linked — `strict` also asks that it is marked external rather than left unresolved.

    python -m benchmarks.eval.reports_evaluate REPORT.pdf REPORT.truth.json
    python -m benchmarks.eval.reports_evaluate --corpus [--llm off|on] [--steps scope,deep_summary] [--max-docs N]

`--corpus`: the development corpus — every PDF of `../shared/corpus/reports` (beside the checkout)
with its `.truth.json`, and the synthetic samples of `data/samples/reports` scored by their phrase
truth (`tests/pipelines/reports/helpers.py`, truth by construction: a phrase, its page, the targets
or "external"); the samples that are copies of corpus PDFs are skipped. `--llm on` runs the
pipeline's LLM steps (`--steps`, default scope only) with the default model (`EngineSettings.from_env()`:
the packaged Gemma 3 270M unless LONGDOC_MODEL / LONGDOC_MAX_MODEL_LEN say otherwise)
and prints, per document, the time and each step's requests, tokens and cache reuse, and the
totals with and without the step side by side when `--llm both`.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from pipelines.reports import ReportResult

FLOAT_KINDS = ("figure", "table")


def _boxes(m: dict) -> list[tuple[float, float, float, float]]:
    return [tuple(b) for b in m.get("boxes") or [m["bbox"]]]


def _hit(a, b, pad: float = 1.5) -> bool:
    return a[0] - pad < b[2] and b[0] - pad < a[2] and a[1] - pad < b[3] and b[1] - pad < a[3]


def score(result: ReportResult, truth: dict) -> dict:
    """Numbers for one document (see the module docstring)."""
    key = {t.id: (t.kind, t.number) for t in result.targets}
    pred_t = {(t.kind, t.number, t.page) for t in result.targets if t.kind in FLOAT_KINDS}
    true_t = {(t["kind"], t["number"], t["page"]) for t in truth["targets"]}
    tp = len(pred_t & true_t)
    prec = tp / len(pred_t) if pred_t else 1.0
    rec = tp / len(true_t) if true_t else 1.0
    f1 = 2 * prec * rec / (prec + rec) if prec + rec else 0.0

    float_mentions = [m for m in result.mentions if m.kind in ("figure", "table", "exhibit", "chart", "deictic", "chain")]
    matches: dict[int, list[int]] = {}
    truth_of: list[int | None] = []
    for i, tm in enumerate(truth["mentions"]):
        found = None
        for j, pm in enumerate(float_mentions):
            if pm.page != tm["page"] or pm.bbox is None:
                continue
            boxes = pm.boxes or ([pm.bbox] if pm.bbox else [])
            if any(_hit(b, tb) for b in boxes for tb in _boxes(tm)):
                found = j
                break
        truth_of.append(found)
        if found is not None:
            matches.setdefault(found, []).append(i)
    correct = strict = detected = 0
    rows = []
    for i, tm in enumerate(truth["mentions"]):
        j = truth_of[i]
        want = {(t["kind"], t["number"]) for t in tm.get("targets", [])}
        got: set = set()
        res = "missed"
        if j is not None:
            detected += 1
            pm = float_mentions[j]
            got = {key[t] for t in pm.targets if t in key}
            res = pm.resolution
        if tm["resolution"] == "internal":
            union = set().union(*({(t["kind"], t["number"]) for t in truth["mentions"][k].get("targets", [])} for k in matches.get(j, [i])))
            ok = j is not None and want <= got and got <= union
            ok_strict = ok
        else:  # external (or ambiguous in the truth): nothing may be linked
            ok = not got
            ok_strict = ok and res == ("external" if tm["resolution"] == "external" else "ambiguous")
        correct += ok
        strict += ok_strict
        rows.append({"page": tm["page"], "text": tm["text"], "truth": tm["resolution"], "want": sorted(want),
                     "got": sorted(got), "predicted_resolution": res, "correct": ok})
    n = len(truth["mentions"])
    return {
        "targets": {"predicted": len(pred_t), "truth": len(true_t), "tp": tp, "precision": round(prec, 4), "recall": round(rec, 4), "f1": round(f1, 4)},
        "mentions": {"truth": n, "detected": detected, "correct": correct, "accuracy": round(correct / n, 4) if n else 1.0,
                     "strict_correct": strict, "strict_accuracy": round(strict / n, 4) if n else 1.0},
        "rows": rows,
    }


ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT.parent / "shared" / "corpus" / "reports"
SAMPLES = ROOT / "data" / "samples" / "reports"
SAMPLE_TRUTH = {"en-paper-synthetic.pdf": "EN_PAPER_TRUTH", "zh-broker-synthetic.pdf": "ZH_BROKER_TRUTH"}


def score_phrases(doc, result: ReportResult, truth: list) -> dict:
    """Mention accuracy by phrase truth ((phrase, page, targets | "external" | "partial"), as the
    fixture tests score the synthetic reports); `strict` also asks externals to be marked external."""
    from tests.pipelines.reports.test_reports_fixtures import mentions_in, targets_in

    correct = strict = 0
    rows = []
    for phrase, page, want in truth:
        try:
            m = mentions_in(doc, result, phrase, page)[0]
        except AssertionError:
            rows.append({"page": page, "text": phrase, "truth": want, "got": None, "correct": False})
            continue
        if want == "external":
            ok, ok_strict = not m.targets, m.resolution == "external" and not m.targets
        elif want == "partial":
            ok = ok_strict = m.targets == ["figure-2", "figure-3"]
        else:
            ok = ok_strict = targets_in(doc, result, phrase, page) == sorted(want) and m.resolution == "internal"
        correct += ok
        strict += ok_strict
        rows.append({"page": page, "text": phrase, "truth": want, "got": m.targets, "predicted_resolution": m.resolution,
                     "correct": ok})
    n = len(truth)
    return {"mentions": {"truth": n, "correct": correct, "accuracy": round(correct / n, 4) if n else 1.0,
                         "strict_correct": strict, "strict_accuracy": round(strict / n, 4) if n else 1.0}, "rows": rows}


def corpus_items() -> list[tuple[Path, object]]:
    """(pdf, truth) of the development corpus: a truth dict (box truth) or a phrase list."""
    import hashlib

    import tests.pipelines.reports.helpers as H

    items: list[tuple[Path, object]] = []
    seen = set()
    for pdf in sorted(CORPUS.glob("*.pdf")) if CORPUS.is_dir() else []:
        truth = pdf.with_suffix(".truth.json")
        if truth.exists():
            items.append((pdf, json.loads(truth.read_text(encoding="utf-8"))))
            seen.add(hashlib.sha256(pdf.read_bytes()).hexdigest())
    for pdf in sorted(SAMPLES.glob("*.pdf")):
        if hashlib.sha256(pdf.read_bytes()).hexdigest() in seen:
            continue
        if pdf.name in SAMPLE_TRUTH:
            items.append((pdf, getattr(H, SAMPLE_TRUTH[pdf.name])))
        elif pdf.with_suffix(".truth.json").exists():
            items.append((pdf, json.loads(pdf.with_suffix(".truth.json").read_text(encoding="utf-8"))))
    return items


def _run(pdf: Path, truth, run, steps, strategy: str = "auto") -> tuple[dict, ReportResult, float]:
    import time

    from pipelines.documents import load_document
    from pipelines.reports import analyse_document

    doc = load_document(pdf)
    t0 = time.perf_counter()
    result = analyse_document(doc, pdf.read_bytes(), llm=run, llm_steps=steps, summary_strategy=strategy)
    secs = time.perf_counter() - t0
    s = score(result, truth) if isinstance(truth, dict) else score_phrases(doc, result, truth)
    return s, result, secs


def _print_doc(name: str, s: dict, result: ReportResult, secs: float, mode: str) -> None:
    m = s["mentions"]
    print(f"[{mode}] {name}: mentions {m['correct']}/{m['truth']} = {m['accuracy']:.3f} "
          f"(strict {m['strict_correct']}/{m['truth']} = {m['strict_accuracy']:.3f}); {secs:.1f} s")
    for r in s["rows"]:
        if not r["correct"]:
            print(f"   wrong: p{r['page']} {r['text']!r} truth={r['truth']} got={r['got']} ({r.get('predicted_resolution')})")
    if result.llm is not None:
        for st in result.llm.steps:
            print(f"   step {st.step}: ran={st.ran} {st.reason or ''} {st.error or ''} {st.seconds:.1f} s, "
                  f"{st.requests} requests, {st.prompt_tokens} prompt + {st.generated_tokens} generated tokens, "
                  f"reuse {st.reuse}")
    for d in result.scope or []:
        print(f"   scope: {d.text!r} ({d.case}) rules {d.rule_resolution} p(ext) prior {d.rule_p_external:.2f} "
              f"margin {d.model_margin:+.2f} -> {d.p_external:.2f} {d.decision}{' CHANGED' if d.changed else ''}")
    if result.deep_summary is not None:
        ds = result.deep_summary
        sents = [x for sec in ds.sections for x in sec.sentences]
        read = sum(x.attention is not None for x in sents)
        errors = sum(sec.error is not None for sec in ds.sections)
        print(f"   deep summary: strategy {ds.strategy}, {len(ds.sections)} sections ({errors} without a summary), "
              f"{len(sents)} key sentences quoted ({read} with the model's attention), {len(ds.whole)} for the whole report, "
              f"{sum(len(x.callouts) for x in ds.sections)} callouts "
              f"({sum(c.first for x in ds.sections for c in x.callouts)} described); dropped: {ds.dropped}")
        for why in sorted({sec.error for sec in ds.sections if sec.error}):
            print(f"     {why}")
        for sec in ds.sections[:3]:
            print(f"     {sec.title[:40]!r}: {' '.join(x.text for x in sec.sentences)[:200]!r}")
        print(f"     whole: {' '.join(x.text for x in ds.whole)[:240]!r}")


def corpus_main(mode: str, steps: list[str], max_docs: int | None, strategy: str, docs: list[str] | None = None) -> int:
    from pipelines.llm import EngineSettings, LLMRun

    items = [it for it in corpus_items() if not docs or it[0].name in docs]
    items = items[:max_docs] if max_docs else items
    modes = ["off", "on"] if mode == "both" else [mode]
    for md in modes:
        tot = {"correct": 0, "strict": 0, "truth": 0, "seconds": 0.0}
        for pdf, truth in items:
            run = None if md == "off" else LLMRun("on", EngineSettings.from_env())
            s, result, secs = _run(pdf, truth, run, steps, strategy or "auto")
            _print_doc(pdf.name, s, result, secs, md)
            m = s["mentions"]
            tot["correct"] += m["correct"]
            tot["strict"] += m["strict_correct"]
            tot["truth"] += m["truth"]
            tot["seconds"] += secs
        print(f"[{md}] total: mentions {tot['correct']}/{tot['truth']} = {tot['correct'] / tot['truth']:.4f} "
              f"(strict {tot['strict']}/{tot['truth']} = {tot['strict'] / tot['truth']:.4f}); "
              f"{tot['seconds']:.1f} s over {len(items)} documents")
    return 0


def main(argv: list[str] | None = None) -> int:
    from pipelines.documents import load_document
    from pipelines.reports import analyse_document

    argv = sys.argv[1:] if argv is None else argv
    if "--corpus" in argv:
        import argparse

        ap = argparse.ArgumentParser(prog="reports_evaluate")
        ap.add_argument("--corpus", action="store_true")
        ap.add_argument("--llm", choices=["off", "on", "both"], default="off")
        ap.add_argument("--steps", default="scope", help="comma-separated: scope, deep_summary")
        ap.add_argument("--strategy", default="auto", help="deep summary strategy: auto (= key sentences)")
        ap.add_argument("--max-docs", type=int, default=None)
        ap.add_argument("--docs", default="", help="comma-separated file names to keep (default: all)")
        a = ap.parse_args(argv)
        steps = [f"reports.{x.strip()}" for x in a.steps.split(",") if x.strip()]
        return corpus_main(a.llm, steps, a.max_docs, a.strategy, [x for x in a.docs.split(",") if x])
    if len(argv) % 2 or not argv:
        print("usage: python -m benchmarks.eval.reports_evaluate REPORT.pdf TRUTH.json [REPORT.pdf TRUTH.json ...]\n"
              "       python -m benchmarks.eval.reports_evaluate --corpus [--llm off|on|both] [--steps scope,deep_summary]",
              file=sys.stderr)
        return 2
    for pdf, truth in zip(argv[::2], argv[1::2], strict=True):
        doc = load_document(pdf)
        result = analyse_document(doc, Path(pdf).read_bytes())
        s = score(result, json.loads(Path(truth).read_text(encoding="utf-8")))
        t, m = s["targets"], s["mentions"]
        print(f"{Path(pdf).name}: targets P={t['precision']:.3f} R={t['recall']:.3f} F1={t['f1']:.3f} "
              f"({t['tp']}/{t['truth']}); mentions {m['correct']}/{m['truth']} = {m['accuracy']:.3f} "
              f"(strict, externals marked external: {m['strict_correct']}/{m['truth']} = {m['strict_accuracy']:.3f}; detected {m['detected']})")
        for r in s["rows"]:
            if not r["correct"]:
                print(f"   wrong: p{r['page']} {r['text']!r} truth={r['truth']} want={r['want']} got={r['got']} ({r['predicted_resolution']})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
