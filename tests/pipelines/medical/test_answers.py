"""Questions for the whole medication or problem list (pipelines.medical.answers): answered from the
lists with dates, quoting the notes that show each item; a question about one drug is left to
evidence search (which quotes the passage that holds it)."""

from __future__ import annotations

from pathlib import Path

from pipelines.documents import load_document
from pipelines.medical import MedicalPipeline
from pipelines.medical.answers import structure_answer

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "medical" / "en-appendectomy"


def test_medication_and_problem_lists_quote_their_notes():
    docs = [load_document(p) for p in sorted(FIX.glob("*.txt"))]
    result = MedicalPipeline().run_documents(docs)
    texts = {d.doc_id: d.text for d in docs}
    meds = structure_answer(result, docs, "What medications is the patient on?")
    assert meds.route == "structure" and meds.text.startswith("Medications: ")
    assert all(m.drug in meds.text for m in result.medications)
    for s in meds.spans:
        assert texts[s.doc_id][s.char_start:s.char_end] == s.text
    assert any("linezolid" in s.text.lower() for s in meds.spans)
    probs = structure_answer(result, docs, "What is the problem list?")
    assert probs.text.startswith("Problems: ") and len(probs.spans) == min(len(result.problems), 20)
    assert structure_answer(result, docs, "Which antibiotic was started on admission?") is None
    assert structure_answer(result, docs, "What medications was the patient discharged on?") is None  # part of it
