"""Pieces every UI page shares: input widgets (upload, paste, bundled sample), highlighted text,
the download button, and ingest errors shown as one line."""

from __future__ import annotations

import html
from pathlib import Path

import streamlit as st

from pipelines.documents import Document, IngestError, load_bytes

SAMPLES = Path(__file__).resolve().parents[2] / "data" / "samples"
UPLOAD_TYPES = ["txt", "md", "docx", "pdf"]


def sample_files(pipeline: str) -> list[Path]:
    folder = SAMPLES / pipeline
    if not folder.is_dir():
        return []
    return sorted(
        p for p in folder.rglob("*")
        if p.is_file() and p.suffix.lower() in {".txt", ".md", ".docx", ".pdf"} and not p.name.upper().startswith(("PROVENANCE", "README"))
    )


def ingest(name: str, data: bytes) -> Document | None:
    """Load uploaded bytes; show a one-line error and return None for bad input."""
    try:
        return load_bytes(data, name)
    except IngestError as exc:
        st.error(str(exc))
        return None


def document_input(pipeline: str, key: str) -> tuple[str, bytes] | None:
    """Upload, paste or pick a bundled sample. Returns (name, bytes) of the chosen input, or None."""
    tab_upload, tab_paste, tab_sample = st.tabs(["Upload a file", "Paste text", "Bundled sample"])
    chosen: tuple[str, bytes] | None = None
    with tab_upload:
        up = st.file_uploader("Document", type=UPLOAD_TYPES, key=f"{key}_upload")
        if up is not None and st.button("Analyse the upload", key=f"{key}_run_upload", type="primary"):
            chosen = (up.name, up.getvalue())
    with tab_paste:
        text = st.text_area("Text", height=200, key=f"{key}_paste", placeholder="Paste the document text here")
        if st.button("Analyse the text", key=f"{key}_run_paste", type="primary") and text.strip():
            chosen = ("pasted.txt", text.encode("utf-8"))
    with tab_sample:
        samples = sample_files(pipeline)
        if samples:
            pick = st.selectbox("Sample", samples, format_func=lambda p: str(p.relative_to(SAMPLES / pipeline)),
                                key=f"{key}_sample")
            if st.button("Analyse the sample", key=f"{key}_run_sample", type="primary"):
                chosen = (pick.name, pick.read_bytes())
        else:
            st.caption("No bundled samples.")
    return chosen


def highlight(text: str, base: int, marks: list[tuple[int, int, str, str]]) -> str:
    """HTML of `text` (which starts at document offset `base`) with [start, end) ranges marked.
    marks: (start, end, css colour, title) in document offsets; overlaps keep the first mark."""
    spans = sorted((max(s - base, 0), min(e - base, len(text)), c, t) for s, e, c, t in marks if e > s)
    out, pos = [], 0
    for s, e, colour, title in spans:
        if s < pos:
            continue
        out.append(html.escape(text[pos:s]))
        out.append(f'<mark style="background:{colour};padding:0 2px;border-radius:3px" title="{html.escape(title)}">{html.escape(text[s:e])}</mark>')
        pos = e
    out.append(html.escape(text[pos:]))
    body = "".join(out).replace("\n", "<br>")
    return f'<div style="line-height:1.7;font-size:0.95rem">{body}</div>'
