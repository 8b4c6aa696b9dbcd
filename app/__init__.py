"""The surfaces people touch: the `longdoc` CLI (`cli`, one module per command group in `commands/`),
the batch runner and its executors (`batch`), JSON export (`export`), drawings of results for the
terminal, HTML and the UI (`render/`), the Streamlit pages (`ui/`), and questions over a document
with the engine (`ask`). The app imports each pipeline through its package's public names."""
