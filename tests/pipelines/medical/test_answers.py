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


def test_labs_out_of_range_are_listed_once_each_with_range_and_date_quoting_their_line():
    folder = Path(__file__).resolve().parents[3] / "data" / "samples" / "medical" / "zh-cholecystitis"
    docs = [load_document(p) for p in sorted(folder.glob("*.txt"))]
    result = MedicalPipeline().run_documents(docs)
    texts = {d.doc_id: d.text for d in docs}
    flagged = [e for e in result.entities if e.type == "lab" and e.normalized.get("flag") in ("high", "low")]
    assert flagged
    for q in ("患者有哪些检验结果异常？", "Which lab results were abnormal?", "What labs were out of range?"):
        a = structure_answer(result, docs, q)
        assert a is not None and a.route == "structure", q
        assert a.text.startswith("异常检验结果：" if "患者" in q else "Labs out of range: ")
        for s in a.spans:
            assert texts[s.doc_id][s.char_start:s.char_end] == s.text
    zh = structure_answer(result, docs, "患者有哪些检验结果异常？")
    assert "白细胞计数 14.8" in zh.text and "参考范围 3.5–9.5" in zh.text and "偏高" in zh.text
    assert "血红蛋白 98 g/L (偏低" in zh.text
    # the WBC of 14.8 in the table and in the narrative on the same day is one result
    assert zh.text.count("14.8") == 1 and len(zh.spans) == zh.text.count("; ") + 1
    assert structure_answer(result, docs, "What was the white cell count on admission?") is None
