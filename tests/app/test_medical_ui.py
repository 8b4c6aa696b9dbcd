"""The medical Streamlit page: run_input called directly, and the page driven by AppTest."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from pipelines.documents import IngestError
from pipelines.medical.models import MedicalResult

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "medical"
SCRIPT = "from app.ui.medical_page import page\npage()\n"


def _files(name: str) -> list[tuple[str, bytes]]:
    return [(p.name, p.read_bytes()) for p in sorted((FIX / name).glob("*.txt"))]


def test_run_input_returns_result():
    from app.ui import medical_page

    result = medical_page.run_input(_files("zh-cholecystitis"), "为什么更换抗生素？")
    assert isinstance(result, MedicalResult)
    assert len(result.documents) == 6 and any(e.kind == "question" for e in result.evidence)


def test_run_input_bad_file_raises_one_line():
    from app.ui import medical_page

    with pytest.raises(IngestError) as err:
        medical_page.run_input([("ok.txt", b"Chief complaint: cough."), ("scan.pdf", b"garbage")])
    assert "scan.pdf" in str(err.value) and "\n" not in str(err.value)


def test_page_renders_timeline_documents_and_evidence():
    from app.ui.medical_page import EMBEDDINGS, PENDING

    at = AppTest.from_string(SCRIPT, default_timeout=60)
    at.session_state[EMBEDDINGS] = False
    at.session_state[PENDING] = (_files("en-appendectomy"), "why was the antibiotic changed?")
    at.run()
    assert not at.exception, at.exception
    metrics = {m.label: m.value for m in at.metric}
    # "no fever" at 07:30 and 38.6 °C at 14:00 the same day are both true: no conflict (issue 19)
    assert int(metrics["Documents"]) == 6 and int(metrics["Conflicts"]) == 0
    assert not any("fever" in e.value for e in at.error)
    assert [s.value for s in at.subheader][:2] == ["Problem list", "Medications"]  # what a clinician reads first
    assert len(at.dataframe) >= 2 and any("Abnormal labs" in m.value for m in at.markdown)
    assert any("vancomycin" in m.value for m in at.markdown)  # evidence listed
    assert at.get("arrow_vega_lite_chart") or at.get("vega_lite_chart")  # the timeline chart
    box = at.selectbox(key="medical_doc")
    box.set_value("nursing_notes.txt").run()
    assert not at.exception
    html = " ".join(str(getattr(h, "proto", h)) for h in at.get("html"))
    assert "purulent drainage" in html and "<mark" in html


def test_page_runs_a_bundled_sample():
    at = AppTest.from_string(SCRIPT, default_timeout=60)
    at.session_state["medical_use_embeddings"] = False
    at.run()
    samples = at.selectbox(key="medical_sample")
    names = [getattr(o, "name", str(o)) for o in samples.options]
    assert any("zh-cholecystitis" in n for n in names)
    target = next(o for o in samples.options if "zh-cholecystitis" in str(o))
    samples.set_value(target)
    at.button(key="medical_run").click().run()
    assert not at.exception, at.exception
    assert int({m.label: m.value for m in at.metric}["Documents"]) == 6
    assert at.get("download_button")


def test_documents_of_several_patients_are_shown_one_patient_at_a_time():
    from app.ui.medical_page import EMBEDDINGS, PENDING

    at = AppTest.from_string(SCRIPT, default_timeout=60)
    at.session_state[EMBEDDINGS] = False
    at.session_state[PENDING] = (_files("curated-no-truth"), None)
    at.run()
    assert not at.exception, at.exception
    assert any("of 5 patients, not one" in w.value for w in at.warning)
    box = at.selectbox(key="medical_patient")
    assert len(box.options) == 5 and int({m.label: m.value for m in at.metric}["Documents"]) == 1
    afib = next(k for k, o in enumerate(box.options) if "atrial-fibrillation" in str(o))
    box.set_value(afib).run()
    assert not at.exception, at.exception
    assert any("sex female · age 74 years" in c.value for c in at.caption)
