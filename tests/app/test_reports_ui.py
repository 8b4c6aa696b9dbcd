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


def test_page_image_is_drawn_at_a_readable_resolution_and_zooms_on_a_strip():
    from app.ui.reports_page import PAGE_DPI, _page_image

    pdf = (ROOT / "tests" / "fixtures" / "reports" / "zh-sustechthesis-example.pdf").read_bytes()
    assert PAGE_DPI >= 150
    box = ((100.0, 300.0, 200.0, 312.0), "#2563eb", 3)
    whole = _page_image(pdf, 10, (box,))
    assert whole.size[0] >= 595 * 150 / 72  # an A4 page at 150 dpi or more
    strip = _page_image(pdf, 10, (box,), PAGE_DPI, (240.0, 372.0))
    assert strip.size[0] == whole.size[0] and strip.size[1] < whole.size[1] / 4  # same width, a strip of it


def test_target_card_shows_the_caption_once(tmp_path):
    from app.ui.reports_page import _card_text, run_input

    pdf = H.make_zh_broker(tmp_path / "b.pdf")
    result, _ = run_input((pdf.name, pdf.read_bytes()))
    fig = next(t for t in result.targets if t.id == "figure-1")
    text = _card_text(fig)
    assert fig.caption and text.count(fig.caption) == 1
    at = AppTest.from_function(_page_script, default_timeout=90)
    at.session_state["reports_pending_input"] = (pdf.name, pdf.read_bytes())
    at.run()
    box = next(s for s in at.selectbox if s.label == "Choose a mention")
    option = next(o for o in box.options if "上图" in o)
    assert option.endswith("→ 图1 (figure-1)")  # the target by its printed label
    box.select_index(list(box.options).index(option)).run()
    assert not at.exception, at.exception
    shown = " ".join([m.value for m in at.markdown] + [t.value for t in at.text])  # the card's text is st.text
    captions = [c for e in at.main if type(e).__name__ == "Image" for c in e.captions]
    assert shown.count(fig.caption) == 1 and not any(fig.caption in c for c in captions)
    at.toggle(key="reports_zoom").set_value(True).run()
    assert not at.exception, at.exception
