"""The landing page: what longdoc does and where each pipeline lives."""

from __future__ import annotations

import streamlit as st


def page() -> None:
    st.title("longdoc")
    st.write(
        "Local analysis of long documents that may not leave your machine. Choose a pipeline in the "
        "sidebar, upload a document (txt, md, docx or PDF), paste text, or try a bundled sample. "
        "Every finding points back to the exact words in your document, and every result can be "
        "downloaded as JSON for review."
    )
    st.markdown(
        "- **Patent claim trees**: claims parsed into a dependency tree, with validation findings.\n"
        "- **Contract versions**: two versions of an agreement aligned clause by clause.\n"
        "- **Research reports**: every “see Figure 3” resolved to its target.\n"
        "- **Medical evidence**: one patient's documents → entities, one timeline, conflicts, evidence.\n"
        "- **Ask a document**: questions over a long document with the local model, saying what did not fit.\n"
        "- For folders of documents use the command line: `longdoc batch FOLDER --out DIR`."
    )
