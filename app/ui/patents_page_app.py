"""The patents page on its own (`streamlit run app/ui/patents_page_app.py`, and UI tests)."""

from app.ui.patents_page import page

page()
