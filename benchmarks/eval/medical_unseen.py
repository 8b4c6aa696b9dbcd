"""Entity recall and precision on unseen free-text notes (issue 19): tests/fixtures/medical/unseen-curated/,
seven notes annotated by hand (by a helper engineer, not a clinician; how, in its truth.json and PROVENANCE.md).

    python -m benchmarks.eval.medical_unseen [--split tuning|heldout] [--misses]

Scoring, per coarse type (problem = problem or symptom; medication; measurement = lab or vital):
- a truth mention is found when an entity of the same coarse type overlaps its characters (lenient
  boundaries: "Lasix 40 mg daily" finds "Lasix"); `exact` counts the found ones whose span is the
  truth span, or for a medication starts at the drug name;
- an entity counts against precision when it overlaps no truth mention of its type and no `ignore`
  span (drug classes, social habits, tests without a value, allergies); procedures are not annotated
  and not scored;
- strength: of the truth medications with a strength, how many are found with that dose
  (`normalized.dose`); assertion: of the found problems with a truth assertion, how many match.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FOLDER = ROOT / "tests" / "fixtures" / "medical" / "unseen-curated"
COARSE = {"problem": "problem", "symptom": "problem", "medication": "medication", "lab": "measurement",
          "vital": "measurement"}
TRUTH_COARSE = {"problem": "problem", "medication": "medication", "lab": "measurement", "vital": "measurement"}


def load_truth() -> dict:
    return json.loads((FOLDER / "truth.json").read_text(encoding="utf-8"))


def score(pipe=None, split: str | None = None, misses: list | None = None) -> dict:
    from pipelines.documents import load_document
    from pipelines.medical import MedicalPipeline

    pipe = pipe or MedicalPipeline(use_embeddings=False)
    counts = {c: {"truth": 0, "found": 0, "exact": 0, "predicted": 0, "wrong": 0}
              for c in ("problem", "medication", "measurement")}
    strength = [0, 0]
    assertion = [0, 0]
    for d in load_truth()["documents"]:
        if split and d["split"] != split:
            continue
        doc = load_document(FOLDER / d["file"])
        result = pipe.run_documents([doc])
        ents = [e for e in result.entities if e.type in COARSE]
        truth = [t for t in d["entities"] if t["type"] != "ignore"]
        ignore = [t for t in d["entities"] if t["type"] == "ignore"]
        for t in truth:
            c = TRUTH_COARSE[t["type"]]
            counts[c]["truth"] += 1
            hits = [e for e in ents if COARSE[e.type] == c and e.span.char_start < t["end"] and t["start"] < e.span.char_end]
            if not hits:
                if misses is not None:
                    misses.append(f"{d['split']} {d['file']}: {c} {t['text']!r}")
                continue
            counts[c]["found"] += 1
            counts[c]["exact"] += any((e.span.char_start, e.span.char_end) == (t["start"], t["end"]) or
                                      (c == "medication" and e.span.char_start <= t["start"] and
                                       e.text[t["start"] - e.span.char_start:].startswith(t["text"].split()[0]))
                                      for e in hits)
            if t.get("strength"):
                strength[1] += 1
                strength[0] += any(e.normalized.get("dose") == t["strength"] for e in hits)
            if c == "problem" and t.get("assertion"):
                assertion[1] += 1
                ok = any(e.assertion == t["assertion"] for e in hits)
                assertion[0] += ok
                if not ok and misses is not None:
                    misses.append(f"{d['split']} {d['file']}: assertion {t['text']!r} {t['assertion']} got "
                                  f"{[e.assertion for e in hits]}")
        for e in ents:
            c = COARSE[e.type]
            counts[c]["predicted"] += 1
            s, t_end = e.span.char_start, e.span.char_end
            if any(x["start"] < t_end and s < x["end"] for x in ignore):
                counts[c]["predicted"] -= 1
                continue
            if not any(TRUTH_COARSE[x["type"]] == c and x["start"] < t_end and s < x["end"] for x in truth):
                counts[c]["wrong"] += 1
                if misses is not None:
                    misses.append(f"{d['split']} {d['file']}: extra {e.type} {e.text!r}")
    out: dict = {}
    tot = {"truth": 0, "found": 0, "predicted": 0, "wrong": 0}
    for c, v in counts.items():
        for k in tot:
            tot[k] += v[k]
        out[c] = {**v, "recall": round(v["found"] / v["truth"], 3) if v["truth"] else None,
                  "precision": round(1 - v["wrong"] / v["predicted"], 3) if v["predicted"] else None}
    out["all"] = {**tot, "recall": round(tot["found"] / tot["truth"], 3),
                  "precision": round(1 - tot["wrong"] / tot["predicted"], 3) if tot["predicted"] else None}
    out["medication_strength"] = {"right": strength[0], "n": strength[1]}
    out["problem_assertion"] = {"right": assertion[0], "n": assertion[1]}
    return out


if __name__ == "__main__":
    split = sys.argv[sys.argv.index("--split") + 1] if "--split" in sys.argv else None
    misses: list | None = [] if "--misses" in sys.argv else None
    res = {s: score(split=s, misses=misses if s == split or split is None else None)
           for s in ([split] if split else ["tuning", "heldout"])}
    print(json.dumps(res, indent=1))
    for m in misses or []:
        print(m)
