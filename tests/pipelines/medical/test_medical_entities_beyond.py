"""Entities beyond the word list (issue 19): a medication section written as one wrapped sentence
gives one medication per item, known to the lexicon or not; combination products are one drug."""

from __future__ import annotations

from pathlib import Path

from pipelines.documents import Document, load_document
from pipelines.medical.pipeline import MedicalPipeline

FIX = Path(__file__).resolve().parents[3] / "tests" / "fixtures" / "medical"


def _meds(doc: Document) -> list:
    return [e for e in MedicalPipeline(use_embeddings=False).run_documents([doc]).entities if e.type == "medication"]


def test_anemia_consult_prose_medication_list():
    doc = load_document(FIX / "curated-no-truth" / "anemia-consult.txt")
    meds = _meds(doc)
    listed = [e.text for e in meds if e.section == "medications"]
    assert listed == ["Coumadin", "Lasix", "metformin", "folic acid", "diltiazem", "B12", "Prevacid", "Feosol"]
    for e in meds:
        assert doc.text[e.span.char_start:e.span.char_end] == e.text


def test_combination_products_are_one_drug():
    doc = Document.from_text("Started amoxicillin/clavulanate 875/125 mg PO BID. Piperacillin-tazobactam 4.5 g IV q8h.\n"
                             "改为哌拉西林他唑巴坦 4.5g 静滴 q8h。", doc_id="x.txt")
    got = [(e.text, e.concept, e.normalized.get("components")) for e in _meds(doc)]
    assert got[0] == ("amoxicillin/clavulanate 875/125 mg PO BID", "amoxicillin/clavulanate", ["amoxicillin", "clavulanate"])
    assert got[1][1] == "piperacillin-tazobactam"  # a lexicon name of its own
    assert got[2][:2] == ("哌拉西林他唑巴坦 4.5g 静滴 q8h", "哌拉西林/他唑巴坦")
    assert len(got) == 3


def test_drug_strength_form_pattern_finds_drugs_outside_the_lexicon():
    doc = Document.from_text("Home meds: Eliquis 5 mg tablet PO BID. Started on Keppra 500 mg PO BID.\n"
                             "Weight 80 kg. Protein 7 g/dL. Total 20 mg given. Zofran 4 mg IV once.", doc_id="x.txt")
    got = [(e.text, e.concept, e.normalized.get("dose"), e.normalized.get("route")) for e in _meds(doc)]
    assert got == [("Eliquis 5 mg tablet PO BID", "eliquis", "5", "oral"), ("Keppra 500 mg PO BID", "keppra", "500", "oral"),
                   ("Zofran 4 mg IV once", "zofran", "4", "intravenous")]


def _ents(text: str) -> list:
    return MedicalPipeline(use_embeddings=False).run_documents([Document.from_text(text, doc_id="x.txt")]).entities


def test_drugs_in_a_list_with_a_known_drug_and_after_a_route():
    text = ("He has diuresed with IV Lasix. He was placed on Prinivil, aspirin, oxybutynin,\ndocusate, and Klor-Con. "
            "Given a prescription for Percocet and\nOxyContin. Started IV fluids and IV antibiotics.")
    meds = [e.text for e in _ents(text) if e.type == "medication"]
    assert meds == ["IV Lasix", "Prinivil", "aspirin", "oxybutynin", "docusate", "Klor-Con", "Percocet", "OxyContin"]


def test_a_dose_is_not_a_lab_result_and_vitals_in_prose():
    text = ("DISCHARGE MEDICATIONS: Lasix 40 mg daily, potassium chloride 10 mEq daily.\n"
            "PHYSICAL EXAMINATION: His temperature is 100.3, blood pressure 129/59, respirations 16, heart rate 84.")
    got = [(e.type, e.text) for e in _ents(text) if e.type in ("medication", "lab", "vital")]
    assert got == [("medication", "Lasix 40 mg daily"), ("medication", "potassium chloride 10 mEq daily"),
                   ("vital", "temperature is 100.3"), ("vital", "blood pressure 129/59"), ("vital", "respirations 16"),
                   ("vital", "heart rate 84")]


def test_disorders_by_word_form_and_headings_by_their_word():
    text = ("DIAGNOSES AT DISCHARGE\n1. Tobacco use.\n2. Chronic venostasis.\n"
            "HOSPITAL COURSE: Echo showed left atrial enlargement and diastolic dysfunction, but no ischemia. "
            "The diagnosis was discussed.")
    got = [(e.text, e.type, e.assertion, e.section) for e in _ents(text) if e.type in ("problem", "symptom")]
    assert got == [("Tobacco use", "problem", "present", "discharge_diagnosis"),
                   ("Chronic venostasis", "problem", "present", "discharge_diagnosis"),
                   ("enlargement", "problem", "present", "hospital_course"),
                   ("dysfunction", "problem", "present", "hospital_course"),
                   ("ischemia", "problem", "negated", "hospital_course")]


def test_scope_runs_over_a_wrapped_line_and_a_question_mark_binds_only_its_own_word():
    text = "He is to notify if\nrecurrent fever or chills.\nASSESSMENT: Choledocholithiasis, ? cholecystitis."
    got = {e.text: e.assertion for e in _ents(text) if e.type in ("problem", "symptom")}
    assert got == {"fever": "hypothetical", "chills": "hypothetical", "Choledocholithiasis": "present",
                   "cholecystitis": "possible"}


def test_unseen_notes_recall_and_spans():
    """The hand-annotated unseen notes (benchmarks/eval/medical_unseen.py): recall measured 0.852 (tuning)
    and 0.798 (held out) after the issue-19 rules, 0.680 / 0.615 before; every span is its exact text."""
    from benchmarks.eval.medical_unseen import FOLDER, load_truth, score

    res = {s: score(split=s) for s in ("tuning", "heldout")}
    assert res["tuning"]["all"]["recall"] >= 0.85 and res["tuning"]["all"]["precision"] >= 0.98
    assert res["heldout"]["all"]["recall"] >= 0.79 and res["heldout"]["all"]["precision"] >= 0.95
    for d in load_truth()["documents"]:
        doc = load_document(FOLDER / d["file"])
        for t in d["entities"]:
            assert doc.text[t["start"]:t["end"]] == t["text"]
        for e in MedicalPipeline(use_embeddings=False).run_documents([doc]).entities:
            assert doc.text[e.span.char_start:e.span.char_end] == e.text
