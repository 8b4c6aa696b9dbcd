"""The problem list and medication list a clinician reads first (issue 19), in the export."""

from __future__ import annotations

import json
from pathlib import Path

from app.export import to_json
from pipelines.medical.pipeline import MedicalPipeline

SAMPLES = Path(__file__).resolve().parents[3] / "data" / "samples" / "medical"


def _run(name: str):
    pipe = MedicalPipeline(use_embeddings=False)
    return pipe.run_input(pipe.discover(SAMPLES / name)[0])


def test_appendectomy_problem_and_medication_lists():
    r = _run("en-appendectomy")
    probs = {p.concept: p for p in r.problems}
    assert probs["wound infection"].status == "active" and probs["wound infection"].first == "2024-03-11"
    assert probs["diabetes mellitus"].status == "historical"
    assert probs["hypertension"].status == "active"  # past history, and a discharge diagnosis
    assert probs["appendicitis"].first_evidence.text == "Acute appendicitis"
    meds = {m.drug: m for m in r.medications}
    v = meds["vancomycin"]
    assert (v.dose, v.route, v.frequency, v.start, v.status, v.stopped) == (
        "1 g", "intravenous", "every 12 hours", "2024-03-08", "new", False)
    c = meds["cefazolin"]
    assert (c.start, c.stop, c.stopped) == ("2024-03-04", "2024-03-08", True)
    assert meds["lisinopril"].status == "continued" and meds["linezolid"].status == "new"
    assert r.medications[-1].drug == "cefazolin"  # stopped drugs last
    data = json.loads(to_json(r))
    assert data["schema_version"] == "medical/2.5" and data["problems"] and data["medications"]
    for item in r.problems + r.medications:
        for sp in (item.first_evidence, item.last_evidence):
            doc = next(d for d in r.documents if d.info.doc_id == sp.doc_id)
            assert doc.info.doc_id == sp.doc_id and sp.text


def test_cholecystitis_lists():
    r = _run("zh-cholecystitis")
    meds = {m.drug: m for m in r.medications}
    assert (meds["头孢曲松"].stop, meds["哌拉西林/他唑巴坦"].start) == ("2024-05-14", "2024-05-14")
    assert meds["氨氯地平"].status == "continued"
    assert {p.concept for p in r.problems if p.status == "active"} >= {"cholecystitis", "wound infection"}
