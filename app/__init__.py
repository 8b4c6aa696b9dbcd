"""The surfaces people touch: CLI, batch runner, export, Streamlit UI pages, settings."""
