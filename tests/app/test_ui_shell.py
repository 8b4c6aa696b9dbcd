"""The Streamlit shell: the app starts, navigation lists the pages, the home page renders."""

from __future__ import annotations

from pathlib import Path

from streamlit.testing.v1 import AppTest

from tests.app.test_patents_ui import run_patents_page

ROOT = Path(__file__).resolve().parents[2]


def test_app_starts_on_home_page():
    at = AppTest.from_file(str(ROOT / "streamlit_app.py"), default_timeout=60)
    at.run()
    assert not at.exception
    assert at.title[0].value == "longdoc"
    assert any("Patent claim trees" in m.value for m in at.markdown)


def test_patents_page_through_its_input_function():
    sample = ROOT / "data" / "samples" / "patents" / "US7156074.txt"
    at = run_patents_page(sample.name, sample.read_bytes())
    assert not at.exception, at.exception
    metrics = {m.label: m.value for m in at.metric}
    assert int(metrics["Claims"]) >= 2 and int(metrics["Independent"]) >= 1
    # choosing another claim shows its text and parents
    box = at.selectbox(key="patents_claim")
    second = int(box.options[1].split(".")[0])  # options read "2. Shoe structure …"
    box.set_value(second).run()
    assert not at.exception
    assert any("depends on" in c.value for c in at.caption)


def test_patents_page_reports_bad_upload_in_one_line():
    at = run_patents_page("broken.pdf", b"%PDF-1.4 nothing")
    assert not at.exception
    assert at.error[0].value.startswith("broken.pdf: broken PDF")
