"""The research-report Streamlit page: `run_input` and `render` called directly, and the page run
under streamlit.testing's AppTest (a sample picked through the session, a mention chosen)."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

import tests.pipelines.reports.helpers as H
from pipelines.documents import IngestError

ROOT = Path(__file__).resolve().parents[2]


def test_run_input_returns_result_and_document(tmp_path):
    from app.ui.reports_page import run_input

    pdf = H.make_zh_exhibits(tmp_path / "e.pdf")
    result, doc = run_input((pdf.name, pdf.read_bytes()))
    assert doc.source_format == "pdf" and result.stats["figures_tables"] == 3
    assert all(doc.text[m.span.char_start:m.span.char_end] == m.text for m in result.mentions)
    with pytest.raises(IngestError):
        run_input(("bad.pdf", b"%PDF-1.4 nothing"))


def _page_script() -> None:
    from app.ui.reports_page import page

    page()


def test_page_renders_a_report_and_a_chosen_mention(tmp_path):
    pdf = H.make_zh_broker(tmp_path / "b.pdf")
    at = AppTest.from_function(_page_script, default_timeout=90)
    at.session_state["reports_pending_input"] = (pdf.name, pdf.read_bytes())
    at.run()
    assert not at.exception, at.exception
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Figures/tables"] == "5"
    box = next(s for s in at.selectbox if s.label == "Choose a mention")
    options = list(box.options)
    pick = next(i for i, o in enumerate(options) if "上图" in o)
    box.select_index(pick).run()
    assert not at.exception, at.exception
    texts = " ".join(m.value for m in at.markdown)
    assert "图1" in texts  # the target card of 上图 -> 图1
    images = [e for e in at.main if type(e).__name__ == "Image"]
    assert len(images) >= 2  # the annotated page and the target cropped from it
    assert any("图4" in m.value and "no_such_number" in m.value for m in at.markdown)  # unresolved list


def test_page_shows_one_line_error_for_a_bad_upload():
    at = AppTest.from_function(_page_script, default_timeout=60)
    at.session_state["reports_pending_input"] = ("bad.pdf", b"%PDF-1.4 garbage")
    at.run()
    assert not at.exception
    assert at.error and "bad.pdf" in at.error[0].value


def test_page_runs_a_bundled_sample_and_offers_the_json():
    at = AppTest.from_function(_page_script, default_timeout=90)
    at.run()
    pick = next(s for s in at.selectbox if s.label.startswith("…or a bundled sample"))
    names = [getattr(o, "name", str(o)) for o in pick.options]
    assert "en-paper-synthetic.pdf" in " ".join(names)
    idx = next(i for i, n in enumerate(names) if "en-paper-synthetic" in n)
    pick.select_index(idx).run()
    next(b for b in at.button if b.label == "Run").click().run()
    assert not at.exception, at.exception
    assert {m.label for m in at.metric} >= {"Figures/tables", "Mentions", "Unresolved"}
    assert any(m.label == "Figures/tables" and m.value == "5" for m in at.metric)
    assert at.get("download_button"), "the JSON download is offered"
