"""longdoc's web UI. Start it with `longdoc ui`: it serves on 127.0.0.1 only, watches no files and
stops with its process. (A bare `streamlit run` of this file listens on every interface by default;
to expose the UI to other machines, say so: `longdoc ui --address 0.0.0.0`.)

Navigation over the pages in app/ui/ (PAGES: module, title, URL path, whether it is the home
page); each page module exposes `page()`.
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
    ("app.ui.review_page", "Review table", "review", False),
]


def _pages() -> list:
    pages = []
    for module_name, title, path, default in PAGES:
        module = importlib.import_module(module_name)
        kwargs = {"title": title, "default": default}
        if not default:
            kwargs["url_path"] = path
        pages.append(st.Page(module.page, **kwargs))
    return pages


st.navigation(_pages()).run()
