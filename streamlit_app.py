"""longdoc's web UI: `streamlit run streamlit_app.py` (or `longdoc ui`).

Navigation over the pages in app/ui/; each page module exposes `page()`.
"""

from __future__ import annotations

import importlib

import streamlit as st

st.set_page_config(page_title="longdoc", layout="wide")

PAGES = [
    ("app.ui.home", "Home", "home", True),
    ("app.ui.patents_page", "Patent claim trees", "patents", False),
    ("app.ui.contracts_page", "Contract versions", "contracts", False),
    ("app.ui.reports_page", "Research reports", "reports", False),
    ("app.ui.medical_page", "Medical evidence", "medical", False),
    ("app.ui.ask_page", "Ask a document", "ask", False),
]


def _pages() -> list:
    pages = []
    for module_name, title, path, default in PAGES:
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name == module_name:
                continue  # pipeline page not built yet
            raise
        kwargs = {"title": title, "default": default}
        if not default:
            kwargs["url_path"] = path
        pages.append(st.Page(module.page, **kwargs))
    return pages


st.navigation(_pages()).run()
