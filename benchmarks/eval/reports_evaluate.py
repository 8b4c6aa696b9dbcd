"""Scoring a `ReportResult` against a truth file (the corpus format: `targets` with kind, number,
page; `mentions` with page, text, bbox/boxes, `resolution` internal/external/ambiguous, `targets`).

- target detection: precision/recall/F1 of figure/table targets by (kind, number, page);
- mention-to-target accuracy over the truth mentions: a truth mention is matched to the predicted
  mention whose box overlaps it on the same page; an internal one is correct when the predicted
  targets are exactly the truth targets (a predicted mention covering several truth mentions,
  "Fig. 1 and Fig. 2", may carry the union of theirs); an external one is correct when nothing is
  linked — `strict` also asks that it is marked external rather than left unresolved.

    python -m benchmarks.eval.reports_evaluate REPORT.pdf REPORT.truth.json
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


def main(argv: list[str] | None = None) -> int:
    from pipelines.documents import load_document
    from pipelines.reports import analyse_document

    argv = sys.argv[1:] if argv is None else argv
    if len(argv) % 2 or not argv:
        print("usage: python -m benchmarks.eval.reports_evaluate REPORT.pdf TRUTH.json [REPORT.pdf TRUTH.json ...]", file=sys.stderr)
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
