"""The Ask page (app/ui/ask_page.py) under streamlit.testing's AppTest, with the real default model:
an answer with its fallback report when the document does not fit, the kept text marked (folded
away); a bad upload as one line."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

DPA = Path(__file__).resolve().parents[1] / "fixtures/contracts/en-commonpaper-dpa-1.0-to-1.1/v2.txt"


def _page_script() -> None:
    from app.ui.ask_page import page

    page()


@pytest.mark.model
def test_page_answers_and_shows_what_did_not_fit():
    from app.ui import ask_page

    data = DPA.read_text(encoding="utf-8")[:6000].encode("utf-8")  # ~1.3K tokens
    at = AppTest.from_function(_page_script, default_timeout=240)
    # a 512-token context: the document must be cut (truncate the middle)
    at.session_state[ask_page.PENDING] = ("dpa.txt", data, "Who is the Processor?", "truncate:middle", 16, 512)
    at.run()
    assert not at.exception, at.exception
    metrics = {m.label: m.value for m in at.metric}
    assert int(metrics["Document tokens dropped"].replace(",", "")) > 0
    assert at.warning and "did not fit" in at.warning[0].value and "truncate (middle)" in at.warning[0].value
    assert any("prompt" in c.value and "tokens" in c.value for c in at.caption)
    htmls = [e for e in at.main if type(e).__name__ == "Html"]
    assert any("seen by the model" in h.proto.body for h in htmls)  # the whole document, folded away


def test_page_shows_one_line_error_for_a_bad_upload():
    from app.ui import ask_page

    at = AppTest.from_function(_page_script, default_timeout=60)
    at.session_state[ask_page.PENDING] = ("bad.pdf", b"%PDF-1.4 garbage", "why?", "retrieval", 16, None)
    at.run()
    assert not at.exception
    assert at.error and at.error[0].value.startswith("bad.pdf: ")
