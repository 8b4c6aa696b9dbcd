"""The Streamlit page: run_input directly, and the page through AppTest (sample pair, filters, errors)."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from pipelines.documents import IngestError
from tests.pipelines.contracts.data import load_pair

SCRIPT = "from app.ui.contracts_page import page\npage()\n"


def test_run_input_direct() -> None:
    from app.ui.contracts_page import run_input

    a, b, _ = load_pair("en-commonpaper-csa-1.0-to-1.1")
    r = run_input(("v1.txt", a.encode()), ("v2.txt", b.encode()))
    assert r.stats["modified"] == 1 and r.summary[0].b == "12.3"
    with pytest.raises(IngestError, match="empty.txt"):
        run_input(("v1.txt", a.encode()), ("empty.txt", b""))


def test_page_with_sample_pair() -> None:
    at = AppTest.from_string(SCRIPT, default_timeout=60)
    at.run()
    assert not at.exception
    box = at.selectbox(key="contracts_sample")
    pick = next(o for o in box.options if o.startswith("en-github"))
    box.set_value(pick)
    at.button(key="contracts_run").click()
    at.run()
    assert not at.exception
    assert any("Material changes first" in s.value for s in at.subheader)
    html_blocks = [h.proto.body for h in at.get("html")]
    summary = next(h for h in html_blocks if "href=\"#row-" in h and "<ul" in h)
    table = next(h for h in html_blocks if 'class="rl"' in h)
    assert "<del>" in table and "<ins>" in table and 'id="row-' in table
    assert "⚑" in summary
    import re

    targets = re.findall(r'href="#(row-\d+)"', summary)
    assert targets and all(f'id="{t}"' in table for t in targets)  # every link jumps to a shown row
    ms = at.multiselect(key="contracts_filter")
    assert "unchanged" in ms.options and "unchanged" not in ms.value
    ms.set_value(["added"])
    at.run()
    table = next(h.proto.body for h in at.get("html") if 'class="rl"' in h.proto.body)
    assert table.count("<tr id=") == 4  # the four added clauses only


def test_page_pending_input_and_bad_file() -> None:
    at = AppTest.from_string(SCRIPT, default_timeout=60)
    a, b, _ = load_pair("zh-interpretation-personal-injury-2020-to-2022")
    at.session_state["contracts_pending_input"] = (("v1.txt", a.encode()), ("v2.txt", b.encode()))
    at.run()
    assert not at.exception and len(at.metric) >= 6
    at.session_state["contracts_pending_input"] = (("v1.txt", a.encode()), ("bad.docx", b"not a zip"))
    at.run()
    assert not at.exception
    assert any("bad.docx" in e.value for e in at.error)
