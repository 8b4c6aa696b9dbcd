"""Browser tests: a real headless Chromium against `streamlit run` (marked e2e)."""
