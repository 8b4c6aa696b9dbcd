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


def _timed(text: str, types=("lab", "vital")) -> list[tuple[str, str, str | None]]:
    r = MedicalPipeline(use_embeddings=False).run_documents([Document.from_text(text, doc_id="t.txt")])
    for e in r.entities:
        assert text[e.span.char_start:e.span.char_end] == e.text
    return [(e.normalized.get("analyte"), e.normalized.get("value"), e.time.start if e.time else None)
            for e in r.entities if e.type in types]


def test_vital_sign_rows_take_their_own_times():
    """Issue 19 "Time": a flowsheet row's time cell dates that row's readings, on the latest date above it."""
    got = _timed("NURSING FLOWSHEET\nDate: 2024-03-08\n\nTime   T       HR   BP       RR\n"
                 "06:00  37.2 C  88   120/80   16\n14:00  38.6 C  104  110/70   20\n")
    assert got == [("temperature", "37.2", "2024-03-08T06:00"), ("pulse", "88", "2024-03-08T06:00"),
                   ("blood_pressure", "120/80", "2024-03-08T06:00"), ("respiration", "16", "2024-03-08T06:00"),
                   ("temperature", "38.6", "2024-03-08T14:00"), ("pulse", "104", "2024-03-08T14:00"),
                   ("blood_pressure", "110/70", "2024-03-08T14:00"), ("respiration", "20", "2024-03-08T14:00")]
    zh = _timed("护理记录\n日期：2024-05-14\n\n时间    体温     脉搏      血压\n06:00   37.2℃   88次/分   120/80mmHg\n"
                "14:00   38.6℃   104次/分  110/70mmHg\n")
    assert [t for _, _, t in zh] == ["2024-05-14T06:00"] * 3 + ["2024-05-14T14:00"] * 3
    # timed entries of prose, one per line: each reading takes its own line's time, not the first one
    assert _timed("NURSING\nDate: 2024-03-08\n\n06:00 T 37.2 C\n14:00 T 38.6 C, fever\n", ("vital", "symptom")) == [
        ("temperature", "37.2", "2024-03-08T06:00"), ("temperature", "38.6", "2024-03-08T14:00"),
        (None, None, "2024-03-08T14:00")]


def test_lab_table_rows_take_their_own_collection_times():
    got = _timed("PROGRESS NOTE 2024-03-09\n\n| Date | Time | Test | Result | Unit |\n|---|---|---|---|---|\n"
                 "| 2024-03-05 | 06:00 | WBC | 15.2 | x10^9/L |\n| 2024-03-07 | 06:00 | WBC | 11.0 | x10^9/L |\n")
    assert got == [("WBC", "15.2", "2024-03-05T06:00"), ("WBC", "11.0", "2024-03-07T06:00")]
    got = _timed("LAB RESULTS\nDate: 2024-03-04\n\nDate        Test        Result   Unit\n"
                 "2024-03-05  WBC         15.2     x10^9/L\n2024-03-07  CRP         86       mg/L\n")
    assert got == [("WBC", "15.2", "2024-03-05"), ("CRP", "86", "2024-03-07")]
    zh = _timed("检验报告\n\n采集时间             项目       结果    单位\n2024-05-14 06:00    白细胞计数   14.8   ×10^9/L\n"
                "2024-05-16 06:00    白细胞计数   9.1    ×10^9/L\n")
    assert [t for _, _, t in zh] == ["2024-05-14T06:00", "2024-05-16T06:00"]
    # a date on the next line is not the reference range of the result above it, nor a datetime with
    # the time of the row after it
    doc = Document.from_text("Date: 2024-03-08\n\n06:00 WBC 12.1 x10^9/L\n2024-03-09\n07:00 WBC 9.0 x10^9/L\n", doc_id="w.txt")
    r = MedicalPipeline(use_embeddings=False).run_documents([doc])
    assert [(e.text, e.normalized.get("ref_low"), e.time.start) for e in r.entities if e.type == "lab"] == [
        ("WBC 12.1 x10^9/L", None, "2024-03-08T06:00"), ("WBC 9.0 x10^9/L", None, "2024-03-09T07:00")]


def test_a_wrapped_line_that_starts_with_a_time_is_not_a_timed_entry():
    doc = Document.from_text("EKG reviewed from 07/07/09 at\n08:31 a.m., which shows atrial fibrillation.\n"
                             "Reviewed today\n08:31 a.m. tracing. BNP shows 3788.", doc_id="e.txt")
    r = MedicalPipeline(use_embeddings=False).run_documents([doc])
    assert [(t.text, t.kind) for t in r.times][0] == ("07/07/09 at\n08:31", "datetime")
    bnp = next(e for e in r.entities if e.type == "lab").time
    assert bnp.granularity == "day" and bnp.anchored_to == "document"  # the note's date, not "today\n08:31"
