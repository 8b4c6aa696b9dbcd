"""Issue 19's real cases, counted: patients found in the multi-patient folders, the
atrial-fibrillation consult's lab dates and flags, the appendectomy's planned procedure,
vancomycin interval and fever conflicts, the anemia consult's medications. Prints one JSON line.

    python -m benchmarks.eval.medical_realcases
"""

from __future__ import annotations

import json
from pathlib import Path

from pipelines.documents import load_document
from pipelines.medical.pipeline import MedicalPipeline

ROOT = Path(__file__).resolve().parents[2]
CURATED = ROOT / "tests" / "fixtures" / "medical" / "curated-no-truth"


def count() -> dict:
    pipe = MedicalPipeline(use_embeddings=False)
    out: dict = {
        "zh_notes_inputs": len(pipe.discover(ROOT / "tests" / "fixtures" / "medical" / "zh-cmbclin-sample" / "notes")),
        "curated_inputs": len(pipe.discover(CURATED)),
    }
    r = pipe.run_documents([load_document(CURATED / "atrial-fibrillation-consult.txt")])
    labs = [e for e in r.entities if e.type == "lab"]
    out["afib_labs"] = len(labs)
    out["afib_labs_wrong_date"] = sum(1 for e in labs if e.time and e.time.start in ("2007-11-02", "2007-05-18")
                                      and not e.text.startswith("INR"))
    out["afib_labs_flagged"] = sum(1 for e in labs if e.normalized.get("flag") in ("high", "low"))
    out["afib_normal_lvef_problem"] = sum(1 for e in r.entities if "normal left ventricular" in e.text.lower())
    r = pipe.run_input(pipe.discover(ROOT / "data" / "samples" / "medical" / "en-appendectomy")[0])
    out["appy_fever_conflicts"] = sum(1 for c in r.conflicts if c.concept == "fever")
    out["appy_planned_appendectomy"] = [e.assertion for e in r.entities
                                        if e.doc_id == "admission_note.txt" and "appendectomy" in e.concept]
    out["appy_vancomycin_time"] = [(e.time.start, e.time.end) for e in r.entities if e.concept == "vancomycin"]
    r = pipe.run_documents([load_document(CURATED / "anemia-consult.txt")])
    out["anemia_meds"] = len([e for e in r.entities if e.type == "medication"])
    return out


if __name__ == "__main__":
    print(json.dumps(count()))
