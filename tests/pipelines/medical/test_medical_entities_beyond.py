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
