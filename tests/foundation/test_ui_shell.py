"""The Streamlit shell: the app starts, navigation lists the pages, the home page renders."""

from __future__ import annotations

from pathlib import Path

from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parents[2]


def test_app_starts_on_home_page():
    at = AppTest.from_file(str(ROOT / "streamlit_app.py"), default_timeout=60)
    at.run()
    assert not at.exception
    assert at.title[0].value == "longdoc"
    assert any("Patent claim trees" in m.value for m in at.markdown)
