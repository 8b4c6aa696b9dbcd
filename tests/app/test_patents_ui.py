"""The patents page shows the claim counts a fee calculation needs, what a dependent claim adds,
and a claim's nested elements."""

from __future__ import annotations

from pathlib import Path

from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parents[2]


def run_patents_page(name: str, data: bytes) -> AppTest:
    """The patents page run once on an input given as (file name, bytes)."""
    from app.ui.patents_page import PENDING

    at = AppTest.from_file(str(ROOT / "app" / "ui" / "patents_page_app.py"), default_timeout=60)
    at.session_state[PENDING] = (name, data)
    return at.run()


def test_page_shows_counts_limitation_and_nested_elements():
    sample = ROOT / "tests" / "fixtures" / "patents" / "US7472552.txt"
    at = run_patents_page(sample.name, sample.read_bytes())
    assert not at.exception, at.exception
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Claims"] == "10" and metrics["Independent"] == "1"
    assert metrics["Multiple dependent"] == "0" and metrics["For USPTO fees"] == "10"
    assert any("Counting rule: USPTO: 37 CFR 1.75(c)" in c.value for c in at.caption)
    # claim 1: its elements nested, the fan assembly holding its three items
    md = "\n".join(m.value for m in at.markdown)
    assert "- wherein the fan assembly comprises\n  - a housing including" in md
    box = at.selectbox(key="patents_claim")
    assert box.options[1].startswith("2. wherein the first and second housing portions")
    box.set_value(5).run()
    assert not at.exception
    md = "\n".join(m.value for m in at.markdown)
    assert "**Adds:** wherein one of the housing portions of the housing is formed with a recess" in md
    assert any("introduced in claim 3" in w.value for w in at.warning)
