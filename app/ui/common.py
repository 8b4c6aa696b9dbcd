"""Pieces every UI page shares: input widgets (upload, paste, bundled sample), highlighted text,
the download button, ingest errors shown as one line per bad file (every bad file, not only the
first), and document text shown as text.

Document text is untrusted: a document can hold markdown links, images or HTML. It is shown
through `highlight` (HTML-escaped), `st.text`, or, inside a line of markdown, `md_text` (every
markdown character escaped), never through st.markdown / st.write / st.error as it is.
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence
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
        show_ingest_error(exc)
        return None


class IngestErrors(IngestError):
    """Several files could not be read: `errors` holds one line per bad file, in upload order."""

    def __init__(self, errors: Sequence[IngestError]):
        self.errors = [str(e) for e in errors]
        super().__init__(", ".join(e.name for e in errors), "; ".join(e.reason for e in errors))

    def __str__(self) -> str:
        return "; ".join(self.errors)


def load_all(files: Sequence[tuple[str, bytes]], doc_ids: Sequence[str | None] | None = None) -> list[Document]:
    """Load every (name, bytes); when some fail, raise IngestErrors naming each bad file (all of them,
    not only the first), so one upload of several bad files shows every reason at once."""
    docs, errors = [], []
    for k, (name, data) in enumerate(files):
        doc_id = doc_ids[k] if doc_ids is not None else None
        try:
            docs.append(load_bytes(data, name, doc_id=doc_id) if doc_id is not None else load_bytes(data, name))
        except IngestError as exc:
            errors.append(exc)
    if len(errors) == 1:
        raise errors[0]
    if errors:
        raise IngestErrors(errors)
    return docs


def show_ingest_error(exc: IngestError) -> None:
    """One st.error per bad file (escaped by `md_line`: a file name is not markdown)."""
    for line in getattr(exc, "errors", None) or [str(exc)]:
        st.error(md_line(line))


_MD_INLINE = re.compile(r"([\\`*_{}\[\]<>#|~$])")


def md_line(text: str) -> str:
    """A lighter escape for a one-line message (an ingest error: '<file>: <reason>') that keeps it
    readable in the markdown source: what opens a link, an image, HTML, emphasis, code, LaTeX or a
    heading is escaped, a leading list or quote marker too, and bare-URL autolinks ('://', 'www.')
    are broken; plain '.', ':' and parentheses stay."""
    text = _MD_INLINE.sub(r"\\\1", " ".join(text.split()))
    text = text.replace("://", "\\://").replace("www.", "www\\.").replace("WWW.", "WWW\\.")
    text = re.sub(r"^([-+])", r"\\\1", text)  # a list item
    return re.sub(r"^(\d+)([.)])", r"\1\\\2", text)  # an ordered list item


_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~$:&=\"'^])")


def md_text(text: str, max_chars: int | None = None) -> str:
    """`text` (from a document, a file name) for a line of Streamlit markdown: every character that
    markdown, Streamlit's extensions (colours, icons, LaTeX) or HTML would act on is escaped, and line
    breaks become spaces, so a link, an image or a heading in a document shows as its characters."""
    text = " ".join(text.split())
    if max_chars is not None and len(text) > max_chars:
        text = text[:max_chars] + "…"
    return _MD_SPECIAL.sub(r"\\\1", text)


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
