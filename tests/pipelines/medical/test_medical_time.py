"""Time on real notes (issue 19): a date applies to the events its sentence or table row governs,
planned procedures are hypothetical, and conflicts compare statements at the same time of day."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipelines.documents import Document, load_document
from pipelines.medical.pipeline import MedicalPipeline

ROOT = Path(__file__).resolve().parents[3]
FIX = ROOT / "tests" / "fixtures" / "medical"
SAMPLES = ROOT / "data" / "samples" / "medical"


@pytest.fixture(scope="module")
def afib():
    doc = load_document(FIX / "curated-no-truth" / "atrial-fibrillation-consult.txt")
    return MedicalPipeline(use_embeddings=False).run_documents([doc])


@pytest.fixture(scope="module")
def appy():
    pipe = MedicalPipeline(use_embeddings=False)
    return pipe.run_input(pipe.discover(SAMPLES / "en-appendectomy")[0])


def test_admission_labs_do_not_take_the_dates_of_earlier_sentences(afib):
    labs = {e.text.split()[0].lower(): e for e in afib.entities if e.type == "lab"}
    for name in ("bnp", "sodium", "potassium", "chloride", "bicarbonate", "bun", "creatinine", "troponin", "white",
                 "hematocrit", "platelet"):
        start = labs[name].time.start
        assert start not in ("2007-11-02", "2007-05-18"), (name, start)
    assert labs["inr"].time.start == "2007-05-18"  # "INR 1.03 on 05/18/07": its own sentence's date


def test_a_labelled_date_still_dates_the_labs_after_it():
    doc = Document.from_text("PROGRESS NOTE\n\nHospital course text here.\n\nLabs 03/08/2024: WBC 17.8, CRP 140 mg/L.\n"
                             "Creatinine 1.1.\n", doc_id="n.txt")
    r = MedicalPipeline(use_embeddings=False).run_documents([doc])
    assert {e.time.start for e in r.entities if e.type == "lab"} == {"2024-03-08"}


def test_planned_procedure_is_hypothetical(appy):
    planned = next(e for e in appy.entities if e.doc_id == "admission_note.txt" and "appendectomy" in e.concept)
    assert planned.assertion == "hypothetical" and planned.trigger is not None and planned.trigger.text == "Plan"
    done = next(e for e in appy.entities if e.doc_id == "operative_note.txt" and "appendectomy" in e.concept)
    assert done.assertion == "present"
    doc = Document.from_text("She is scheduled for colonoscopy. We will consider CT of the chest.", doc_id="p.txt")
    r = MedicalPipeline(use_embeddings=False).run_documents([doc])
    assert {e.assertion for e in r.entities if e.type == "procedure"} == {"hypothetical"}


def test_statements_hours_apart_do_not_conflict(appy):
    assert not [c for c in appy.conflicts if c.concept == "fever"]
    doc = Document.from_text("NURSING NOTES\n\n2024-03-08 07:30: No fever.\n\n2024-03-08 09:00: T 38.6 C, fever.\n",
                             doc_id="n.txt")
    r = MedicalPipeline(use_embeddings=False).run_documents([doc])
    c = [c for c in r.conflicts if c.concept == "fever"]
    assert len(c) == 1 and "1.5 h apart, within the 4 h" in c[0].description


def test_medication_start_and_stop_come_from_the_notes_that_start_and_stop_them(appy):
    vanc = next(e for e in appy.entities if e.concept == "vancomycin")
    assert vanc.normalized["course"] == "started"
    assert (vanc.time.start, vanc.time.end) == ("2024-03-08", "2024-03-12")  # from POD 3, not the whole stay
    cef = [e for e in appy.entities if e.concept == "cefazolin"]
    assert [(e.doc_id, e.normalized.get("course"), e.time.start) for e in cef] == [
        ("admission_note.txt", "started", "2024-03-04"), ("discharge_summary.txt", "stopped", "2024-03-08")]
    assert "course" not in next(e for e in appy.entities if e.concept == "lisinopril").normalized


def test_a_normal_finding_is_not_a_negated_problem(afib):
    assert not [e for e in afib.entities if "normal left ventricular" in e.text.lower()]


def test_evidence_below_the_cut_off_is_not_listed(appy):
    from pipelines.medical.evidence import MIN_SCORE, MIN_SHARE_OF_TOP

    for ev in appy.evidence:
        for items in (ev.supporting, ev.contradicting):
            if items:
                floor = max(MIN_SCORE, MIN_SHARE_OF_TOP * items[0].score)
                assert all(it.score >= floor for it in items), (ev.claim, [it.score for it in items])
    assert any(len(ev.supporting) < 5 for ev in appy.evidence)
