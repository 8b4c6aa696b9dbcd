"""Streamlit UI pages (see streamlit_app.py for the navigation)."""
