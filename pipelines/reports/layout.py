"""Layout seen by the reports pipeline: the document's lines (offsets, page, box, character
height), the drawn objects of each PDF page (images, rectangles, curves, rules), tables found by
pdfplumber's table finder, and internal hyperlinks (LaTeX/hyperref `GoTo` annotations).

Everything here is read from the `Document` (text, pages, one box per character) and, when the PDF
bytes are at hand, from the PDF itself: drawn objects with pdfium (fast, no text layout), links
and tables with pdfplumber; without the PDF the pipeline still runs on text and boxes.
"""

from __future__ import annotations

import io
import logging
import statistics
from dataclasses import dataclass, field

import numpy as np

from pipelines.documents import Document, Span

log = logging.getLogger(__name__)

BBox = tuple[float, float, float, float]


@dataclass(frozen=True, slots=True, eq=False, kw_only=True)
class Line(Span):
    """One line of the document text (a layout line in reading order): a `Span` of `doc.text`."""

    index: int
    page: int
    bbox: BBox | None
    height: float  # median character height (0 when unknown)
    blank_before: bool  # an empty line (paragraph gap) precedes it


@dataclass
class Link:
    """An internal link: a clickable box on `page` going to `dest_page` (and `dest_top` if known)."""

    page: int
    bbox: BBox
    dest_page: int
    dest_top: float | None


@dataclass
class PageLayout:
    number: int
    width: float
    height: float
    graphics: list[BBox] = field(default_factory=list)  # images, rects, curves, rules (furniture left out)
    links: list[Link] = field(default_factory=list)


@dataclass
class Layout:
    lines: list[Line]
    pages: dict[int, PageLayout]
    body_height: float  # typical character height of body text
    has_pdf: bool = False
    _pdf: object | None = None  # an open pdfplumber.PDF, for tables on demand

    def lines_on(self, page: int) -> list[Line]:
        """The lines of one page (indexed once: captions ask for their page's lines many times)."""
        index = self.__dict__.get("_by_page")
        if index is None:
            index = {}
            for ln in self.lines:
                index.setdefault(ln.page, []).append(ln)
            self.__dict__["_by_page"] = index
        return index.get(page, [])

    def tables_on(self, page: int) -> list[tuple[BBox, list[list[str]]]]:
        """Ruled tables pdfplumber's table finder finds on a page, with their rows."""
        if self._pdf is None:
            return []
        cache = self.__dict__.setdefault("_tables", {})
        if page in cache:
            return cache[page]
        out: list[tuple[BBox, list[list[str]]]] = []
        try:
            p = self._pdf.pages[page - 1]
            # ruled tables only: a table printed as text (three-line tables) is read from its word
            # block by the caller, which is faster and steadier than the finder's text strategy
            for t in p.find_tables():
                rows = [[(c or "").replace("\n", " ").strip() for c in row] for row in t.extract()]
                rows = [r for r in rows if any(r)]
                if rows:
                    out.append((tuple(round(float(v), 2) for v in t.bbox), rows))
        except Exception as exc:  # pdfplumber can fail on odd pages; tables are extra evidence
            log.debug("table finder failed on page %s: %s", page, exc)
        cache[page] = out
        return out

    def close(self) -> None:
        if self._pdf is not None:
            self._pdf.close()
            self._pdf = None


def build_layout(doc: Document, pdf_bytes: bytes | None = None) -> Layout:
    """Lines of `doc` and, when `pdf_bytes` is given, the drawn objects and links of each page."""
    lines: list[Line] = []
    text = doc.text
    pos = 0
    blank = True
    heights: list[float] = []
    boxes = doc.char_boxes
    for raw in text.split("\n"):
        start, end = pos, pos + len(raw)
        pos = end + 1
        if not raw.strip():
            blank = True
            continue
        h = 0.0
        if boxes is not None and end > start:
            hb = boxes[start:end, 3] - boxes[start:end, 1]
            hb = hb[~np.isnan(hb)]
            if len(hb):
                h = float(np.median(hb))
                heights.append(h)
        lines.append(Line(doc, start, end, index=len(lines), page=doc.page_of(start), bbox=doc.bbox_of(start, end),
                          height=h, blank_before=blank))
        blank = False
    body = statistics.median(heights) if heights else 0.0
    pages = {p.number: PageLayout(p.number, p.width or 0.0, p.height or 0.0) for p in doc.pages}
    layout = Layout(lines, pages, body)
    if pdf_bytes:
        _read_pdf(layout, pdf_bytes)
    return layout


def _read_pdf(layout: Layout, data: bytes) -> None:
    import pdfplumber

    try:
        pdf = pdfplumber.open(io.BytesIO(data))
    except Exception as exc:
        log.warning("cannot reopen the PDF for drawn objects: %s", exc)
        return
    layout._pdf = pdf
    layout.has_pdf = True
    drawn = _drawn_objects(data)
    page_ids: dict[int, int] = {}
    for i, p in enumerate(pdf.pages, start=1):
        try:
            page_ids[p.page_obj.pageid] = i
        except Exception:
            pass
    for i, p in enumerate(pdf.pages, start=1):
        pl = layout.pages.get(i)
        if pl is None:
            continue
        w, h = float(p.width), float(p.height)
        pl.width, pl.height = pl.width or w, pl.height or h
        for box in drawn.get(i, []):
            # page furniture: rules in the header/footer zone, and page-sized backgrounds
            if box[3] < 0.1 * h or box[1] > 0.92 * h:
                continue
            if (box[2] - box[0]) > 0.95 * w and (box[3] - box[1]) > 0.9 * h:
                continue
            pl.graphics.append(box)
        try:
            annots = p.annots or []
        except Exception:
            annots = []
        for a in annots:
            link = _internal_link(pdf, a, i, page_ids)
            if link is not None:
                pl.links.append(link)


def _drawn_objects(data: bytes) -> dict[int, list[BBox]]:
    """Boxes of the images, paths and shadings of each page (top-left origin, PDF points), read
    with pdfium (fast: no text layout). A form XObject counts as one box unless it covers most of
    the page, in which case its own objects are taken (mapped through the form's matrix)."""
    import ctypes

    import pypdfium2 as pdfium
    import pypdfium2.raw as R

    kinds = (R.FPDF_PAGEOBJ_IMAGE, R.FPDF_PAGEOBJ_PATH, R.FPDF_PAGEOBJ_SHADING)
    out: dict[int, list[BBox]] = {}
    try:
        pdf = pdfium.PdfDocument(data)
    except Exception as exc:
        log.warning("pdfium cannot open the PDF: %s", exc)
        return out
    try:
        for i in range(len(pdf)):
            page = pdf[i]
            h, w = float(page.get_height()), float(page.get_width())
            boxes: list[BBox] = []

            def add(left: float, bottom: float, right: float, top: float, h: float = h, boxes: list[BBox] = boxes) -> None:
                boxes.append((round(left, 2), round(h - top, 2), round(right, 2), round(h - bottom, 2)))

            for obj in page.get_objects(max_depth=0):
                try:
                    left, bottom, right, top = obj.get_bounds()
                except Exception:
                    continue
                if obj.type in kinds:
                    add(left, bottom, right, top)
                elif obj.type == R.FPDF_PAGEOBJ_FORM:
                    if (right - left) * (top - bottom) < 0.5 * w * h:
                        add(left, bottom, right, top)
                        continue
                    m = obj.get_matrix()
                    for k in range(R.FPDFFormObj_CountObjects(obj.raw)):
                        child = R.FPDFFormObj_GetObject(obj.raw, k)
                        if R.FPDFPageObj_GetType(child) not in kinds:
                            continue
                        cl, cb, cr, ct = (ctypes.c_float() for _ in range(4))
                        if not R.FPDFPageObj_GetBounds(child, cl, cb, cr, ct):
                            continue
                        x0, y0 = m.on_point(cl.value, cb.value)
                        x1, y1 = m.on_point(cr.value, ct.value)
                        add(min(x0, x1), min(y0, y1), max(x0, x1), max(y0, y1))
            out[i + 1] = boxes
            page.close()
    except Exception as exc:  # drawn objects are evidence; never fail the analysis on them
        log.warning("pdfium failed reading drawn objects: %s", exc)
    finally:
        pdf.close()
    return out


def _internal_link(pdf, annot: dict, page: int, page_ids: dict[int, int]) -> Link | None:
    from pdfminer.pdftypes import resolve1

    try:
        data = annot.get("data") or {}
        dest = data.get("Dest")
        action = resolve1(data.get("A")) if data.get("A") is not None else None
        if dest is None and isinstance(action, dict) and str(action.get("S")).endswith("GoTo'"):
            dest = action.get("D")
        if dest is None:
            return None
        dest = resolve1(dest)
        if isinstance(dest, bytes | str):
            dest = resolve1(pdf.doc.get_dest(dest))
        if isinstance(dest, dict):
            dest = resolve1(dest.get("D"))
        if not isinstance(dest, list) or not dest:
            return None
        ref = dest[0]
        objid = getattr(ref, "objid", None)
        target = page_ids.get(objid) if objid is not None else (int(ref) + 1 if isinstance(ref, int) else None)
        if target is None:
            return None
        top = None
        if len(dest) >= 4 and str(dest[1]).endswith("XYZ'") and isinstance(dest[3], int | float):
            ph = float(pdf.pages[target - 1].height)
            top = ph - float(dest[3])
        box = (float(annot["x0"]), float(annot["top"]), float(annot["x1"]), float(annot["bottom"]))
        return Link(page, box, target, top)
    except Exception:
        return None


def overlaps(a: BBox, b: BBox, pad: float = 0.0) -> bool:
    return a[0] - pad < b[2] and b[0] - pad < a[2] and a[1] - pad < b[3] and b[1] - pad < a[3]


def union(boxes: list[BBox]) -> BBox:
    return (
        round(min(b[0] for b in boxes), 2),
        round(min(b[1] for b in boxes), 2),
        round(max(b[2] for b in boxes), 2),
        round(max(b[3] for b in boxes), 2),
    )
