"""Lab flags on real notes (issue 19): adult reference ranges (pipelines/medical/ranges.py) flag
results printed without a range or unit, with direction; units are normalised and given in SI."""

from __future__ import annotations

from pathlib import Path

from pipelines.documents import Document, load_document
from pipelines.medical.labs import find_labs
from pipelines.medical.pipeline import MedicalPipeline
from pipelines.medical.ranges import RANGES, infer_unit, reference_range

FIX = Path(__file__).resolve().parents[3] / "tests" / "fixtures" / "medical"


def _labs(text: str) -> dict:
    return {m.analyte: m.normalized() for m in find_labs(Document.from_text(text, doc_id="t.txt"))}


def test_atrial_fibrillation_admission_labs_are_flagged():
    doc = load_document(FIX / "curated-no-truth" / "atrial-fibrillation-consult.txt")
    r = MedicalPipeline(use_embeddings=False).run_documents([doc])
    labs = {e.normalized["analyte"]: e for e in r.entities if e.type == "lab"}
    want = {"creatinine": ("high", "mg/dL"), "platelets": ("low", "K/uL"), "BNP": ("high", "pg/mL"),
            "BUN": ("high", "mg/dL"), "troponin": ("high", "ng/mL"), "chloride": ("low", "mEq/L"),
            "sodium": ("normal", "mEq/L"), "INR": ("normal", None), "hematocrit": ("normal", "%")}
    for analyte, (flag, unit) in want.items():
        n = labs[analyte].normalized
        assert (n["flag"], n["unit"]) == (flag, unit), (analyte, n)
        assert n["flag_source"] == "default_range" and n["default_range"]
    cr = labs["creatinine"]
    assert cr.span.text == "creatinine 5.90" and cr.normalized["unit_inferred"] is True
    assert (cr.normalized["value_si"], cr.normalized["unit_si"]) == (521.56, "umol/L")


def test_units_follow_the_value_and_the_note_convention():
    assert infer_unit("creatinine", 88, conventional=True) == "umol/L"  # too large for mg/dL
    assert infer_unit("creatinine", 1.1, conventional=False) == "mg/dL"
    assert infer_unit("platelets", 139, conventional=False) == "x10^9/L"
    zh = _labs("肌酐 150 umol/L。血小板 90×10^9/L。")
    assert (zh["creatinine"]["flag"], zh["creatinine"]["unit"]) == ("high", "umol/L")
    assert (zh["platelets"]["flag"], zh["platelets"]["unit"]) == ("low", "x10^9/L")
    en = _labs("Glucose 250 mg/dl, hemoglobin 9.1 g/dL, potassium 3.1 mmol/L.")
    assert (en["glucose"]["unit"], en["glucose"]["flag"], en["glucose"]["value_si"]) == ("mg/dL", "high", 13.875)
    assert (en["hemoglobin"]["flag"], en["hemoglobin"]["value_si"], en["hemoglobin"]["unit_si"]) == ("low", 91.0, "g/L")
    assert en["potassium"]["flag"] == "low"
    # a printed range or flag wins over the default
    assert _labs("Creatinine 1.25 mg/dL (0.5-1.1)")["creatinine"]["flag"] == "high"


def test_every_common_panel_has_an_adult_range():
    for analyte in ("sodium", "potassium", "chloride", "bicarbonate", "BUN", "creatinine", "glucose", "calcium", "WBC",
                    "hemoglobin", "hematocrit", "platelets", "INR", "PT", "APTT", "troponin", "BNP"):
        assert RANGES[analyte], analyte
        assert reference_range(analyte, RANGES[analyte][0][0]) is not None
