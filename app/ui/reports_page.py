"""The research-report page: a PDF in; its pages drawn with every mention and target outlined (at
200 dpi by default, so Chinese text can be read; the resolution is a choice, and the view can zoom
on the strip of the page around the chosen mention); a chosen mention shows its target cropped
from the page (the printed caption is in the crop) and its caption and description once; the
unresolved mentions listed; the JSON export to download; the LLM steps (off / auto / on: internal or
external by scoring, the deep summary) with their progress and report, and "Ask about this
document", whose marked sentences are also outlined on the page (app/ui/asking.py).

Tests call `run_input((name, data))` and `render(result, pdf_bytes)` directly, or put `(name,
data)` in `st.session_state[PENDING]` before an AppTest run; people use the upload or the samples.
"""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from app.export import to_json
from app.render.reports import deep_summary_markdown, scope_rows, target_names
from app.ui import asking
from app.ui.common import md_text, show_ingest_error
from pipelines.documents import Document, IngestError, load_bytes
from pipelines.reports import Mention, ReportResult, Target

PENDING = "reports_pending_input"
RESULT = "reports_result"
DOC = "reports_document"  # the Document the result was computed from, for questions
ANSWER_COLOUR = "#d97706"  # a sentence an answer rests on, outlined on the page
SAMPLES = Path(__file__).resolve().parents[2] / "data" / "samples" / "reports"
MENTION_COLOUR = "#2563eb"
TARGET_COLOUR = "#16a34a"
UNRESOLVED_COLOUR = "#dc2626"
# page images: Chinese text needs about 150 dpi to be read on screen; 200 by default
PAGE_DPI = 200
DPI_CHOICES = (100, 150, 200, 300)
ZOOM_MARGIN = 60.0  # points above and below the chosen mention in the zoomed view


def run_input(file: tuple[str, bytes], llm=None) -> tuple[ReportResult, Document]:
    """Ingest (name, bytes) and analyse it (llm: a pipelines.llm.LLMRun for the LLM steps). Raises
    `IngestError` (one line) for a bad file."""
    name, data = file
    doc = load_bytes(data, name)
    return analyse(doc, data, llm), doc


def analyse(doc: Document, data: bytes, llm=None) -> ReportResult:
    from pipelines.reports import analyse_document

    return analyse_document(doc, data if doc.source_format == "pdf" else None, llm=llm)


def answer_page_image(pdf_bytes: bytes):
    """For the answers: page `page` of the PDF, cut to the band around `boxes`, the boxes outlined."""
    def draw(page: int, boxes: list):
        top, bottom = min(b[1] for b in boxes), max(b[3] for b in boxes)
        try:
            return _page_image(pdf_bytes, page, tuple((tuple(b), ANSWER_COLOUR, 2) for b in boxes), 120,
                               (top - 24.0, bottom + 24.0))
        except Exception:  # a picture is a convenience; the marked text is shown above it
            return None

    return draw


def _mention_label(result: ReportResult, m: Mention) -> str:
    """A mention in the chooser: page, text and its targets by their printed labels."""
    where = ", ".join(target_names(result, m.targets)) if m.targets else m.resolution
    return f"p{m.page} · {m.text.replace(chr(10), ' ')} → {where}"


@st.cache_data(show_spinner=False, max_entries=64)
def _page_image(pdf_bytes: bytes, page: int, boxes: tuple, resolution: int = PAGE_DPI, band: tuple | None = None):
    """The page as an image with boxes drawn: boxes = ((bbox, colour, width), ...); `band` = (top,
    bottom) in points draws only that horizontal strip of the page (the zoomed view)."""
    import io

    import pdfplumber

    with pdfplumber.open(io.BytesIO(pdf_bytes)) as pdf:
        p = pdf.pages[page - 1]
        if band is not None:
            top, bottom = max(0.0, band[0]), min(float(p.height), band[1])
            p = p.crop((0, top, float(p.width), bottom))
        im = p.to_image(resolution=resolution)
        for bbox, colour, width in boxes:
            im.draw_rect(bbox, stroke=colour, fill=(0, 0, 0, 0), stroke_width=max(1, round(width * resolution / 100)))
        return im.annotated.copy()


@st.cache_data(show_spinner=False, max_entries=64)
def _crop(pdf_bytes: bytes, page: int, bbox: tuple, resolution: int = PAGE_DPI):
    import io

    import pdfplumber

    with pdfplumber.open(io.BytesIO(pdf_bytes)) as pdf:
        p = pdf.pages[page - 1]
        x0, top, x1, bottom = bbox
        box = (max(0.0, x0 - 4), max(0.0, top - 4), min(float(p.width), x1 + 4), min(float(p.height), bottom + 4))
        return p.crop(box).to_image(resolution=resolution).annotated.copy()


def _target_card(t: Target, pdf_bytes: bytes | None) -> None:
    st.markdown(f"**{md_text(t.label)}** ({t.kind}, page {t.page})")
    if pdf_bytes and t.bbox:
        try:  # the crop holds the printed caption already: no caption under the image
            st.image(_crop(pdf_bytes, t.page, tuple(t.bbox)))
        except Exception as exc:  # rendering is a convenience; the data is still shown
            st.caption(f"(cannot draw the crop: {exc})")
    st.text(_card_text(t))  # document text: shown as text, never as markdown
    if t.rows:
        st.dataframe([dict(enumerate(r)) for r in t.rows[:30]], use_container_width=True)


def _card_text(t: Target) -> str:
    """The caption once, then what the description adds (words inside the figure, table rows):
    the description begins with the caption, so it is not repeated."""
    caption, desc = t.caption.strip(), (t.description or "").strip()
    if caption and desc.startswith(caption):
        rest = desc[len(caption):].strip(" \n·;|")
        return f"{caption}\n\n{rest}" if rest else caption
    return desc or caption


def render(result: ReportResult, pdf_bytes: bytes | None) -> None:
    """Metrics, the chosen mention and its target, the annotated page, the unresolved list."""
    s = result.stats
    c1, c2, c3, c4, c5 = st.columns(5)
    c1.metric("Figures/tables", s.get("figures_tables", 0))
    c2.metric("Mentions", s.get("mentions", 0))
    c3.metric("Resolved", s.get("resolved", 0))
    c4.metric("External", s.get("external", 0))
    c5.metric("Unresolved", s.get("unresolved", 0))
    for w in result.warnings:
        st.warning(w)
    st.download_button(
        "Download JSON", to_json(result), file_name=f"{result.document.doc_id or 'report'}.reports.json",
        mime="application/json", key="reports_download",
    )
    targets = {t.id: t for t in result.targets}
    mentions = result.mentions
    left, right = st.columns([3, 2])
    chosen: Mention | None = None
    with right:
        st.subheader("Mention")
        if mentions:
            idx = st.selectbox("Choose a mention", list(range(len(mentions))), format_func=lambda i: _mention_label(result, mentions[i]), key="reports_mention")
            chosen = mentions[idx]
            st.caption(f"{chosen.kind} · {chosen.resolution} · confidence {chosen.confidence:.2f} · hops {chosen.hops}")
            st.write(chosen.reason)
            for tid in chosen.targets:
                if tid in targets:
                    _target_card(targets[tid], pdf_bytes)
        else:
            st.info("No mentions found.")
    with left:
        st.subheader("Page")
        n_pages = result.document.n_pages or 1
        default = chosen.page if chosen else 1
        page_no = st.number_input("Page", min_value=1, max_value=n_pages, value=min(default, n_pages), step=1, key=f"reports_page_{default}")
        if pdf_bytes:
            z1, z2 = st.columns(2)
            dpi = z1.select_slider("Resolution (dpi)", options=DPI_CHOICES, value=PAGE_DPI, key="reports_dpi")
            zoom = z2.toggle("Zoom on the mention", value=False, key="reports_zoom", disabled=chosen is None or chosen.page != page_no)
            band = None
            if zoom and chosen is not None and chosen.page == page_no and chosen.bbox:
                band = (chosen.bbox[1] - ZOOM_MARGIN, chosen.bbox[3] + ZOOM_MARGIN)
            boxes = []
            for t in result.targets:
                if t.page == page_no and t.bbox and t.kind in ("figure", "table", "exhibit", "chart"):
                    boxes.append((tuple(t.bbox), TARGET_COLOUR, 2))
            for m in mentions:
                if m.page == page_no and m.bbox:
                    colour = MENTION_COLOUR if m.resolution == "internal" else UNRESOLVED_COLOUR
                    width = 3 if chosen is m else 1
                    for box in m.boxes or [m.bbox]:
                        boxes.append((tuple(box), colour, width))
            try:
                st.image(_page_image(pdf_bytes, int(page_no), tuple(boxes), int(dpi), band), width="stretch",
                         caption=f"page {page_no}: mentions blue (red: not linked), figures and tables green")
            except Exception as exc:
                st.caption(f"(cannot draw the page: {exc})")
        else:
            st.caption("Not a PDF: no page images.")
    st.subheader("Unresolved mentions")
    if not result.unresolved:
        st.success("Every mention was resolved or recognised as external.")
    for u in result.unresolved:
        st.markdown(f"- page {u.page}: **{md_text(u.text)}** — {u.why}: {md_text(u.reason)}")  # why: a code
    floats = [t for t in result.unreferenced_targets if targets.get(t) and targets[t].kind in ("figure", "table", "exhibit", "chart")]
    if floats:
        st.caption("Figures and tables nothing mentions: " + md_text(", ".join(floats)))
    if result.scope:  # LLM step reports.scope
        st.subheader("Internal or external (model-scored)")
        st.dataframe(scope_rows(result), hide_index=True)
    if result.deep_summary is not None:  # LLM step reports.deep_summary
        st.subheader("Deep summary")
        st.markdown(deep_summary_markdown(result))


def _samples() -> list[Path]:
    if not SAMPLES.is_dir():
        return []
    return sorted(p for p in SAMPLES.iterdir() if p.suffix.lower() in {".pdf", ".txt", ".md", ".docx"})


def page() -> None:
    st.title("Research reports")
    st.caption('Every "see Figure 3", "如图1所示", "the table above" and "[12]" in a report, resolved to its target.')
    chosen = st.session_state.pop(PENDING, None)
    up = st.file_uploader("Report", type=["pdf", "txt", "md", "docx"], key="reports_upload")
    samples = _samples()
    pick = st.selectbox("…or a bundled sample", [None, *samples], format_func=lambda p: "—" if p is None else p.name, key="reports_sample")
    mode = asking.mode_choice("reports")
    if st.button("Run", type="primary", key="reports_run"):
        if up is not None:
            chosen = (up.name, up.getvalue())
        elif pick is not None:
            chosen = (pick.name, pick.read_bytes())
        else:
            st.warning("Upload a report or pick a sample first.")
    if chosen is not None:
        st.session_state.pop(RESULT, None)
        st.session_state.pop(DOC, None)
        asking.clear_answers("reports")
        try:
            doc = load_bytes(chosen[1], chosen[0])
        except IngestError as exc:
            show_ingest_error(exc)
        else:
            with asking.RunProgress("Reading the report…", stop_key=None if mode == "off" else "reports_stop") as prog:
                run = asking.make_run(mode, prog, prog.cancel)
                result = analyse(doc, chosen[1], run)
                pdf = chosen[1] if doc.source_format == "pdf" else None
                asking.keep(DOC, doc)
                asking.keep(RESULT, (result, pdf))
    out = st.session_state.get(RESULT)
    if out:
        result, pdf = out
        asking.show_llm_report(result.llm)
        doc = st.session_state.get(DOC)
        if doc is not None:
            from pipelines.reports import ReportsPipeline

            asking.ask_box("reports", [doc], mode, page_image=answer_page_image(pdf) if pdf else None,
                           structure=ReportsPipeline().structure_answerer(result, [doc]))
        render(*out)
