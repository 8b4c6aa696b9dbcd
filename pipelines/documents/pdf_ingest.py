"""PDF ingest with pdfplumber: one box per character, reading order, and page furniture recognised.

Steps per page: words with their characters -> line numbers (a column of small integers stepping
evenly down the page) set aside -> lines (words grouped by their vertical position) -> a gutter
between two text columns found if there is one, so the left column reads before the right (a
narrow side column, such as a journal's margin with editors and dates, is read as one block) ->
across pages, running headers and footers (the same top or bottom line, digits ignored, on at
least half of the pages) and page numbers set aside as `Furniture`. The text is assembled from
the remaining words: a space between words (none between two CJK characters), a newline between
lines, an empty line where the gap between lines is clearly larger than the line spacing.
"""

from __future__ import annotations

import io
import re
import statistics
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from pipelines.documents.model import Document, Furniture, Page
from pipelines.text.script import is_cjk_wide

_LIGATURES = {"\ufb00": "ff", "\ufb01": "fi", "\ufb02": "fl", "\ufb03": "ffi", "\ufb04": "ffl", "\ufb05": "st", "\ufb06": "st"}
_PAGE_NUMBER = re.compile(
    r"^(?:(?:page|p\.)\s*\d+(?:\s*(?:of|/)\s*\d+)?|[-–—]?\s*\d{1,4}\s*[-–—]?|\d+\s*/\s*\d+|第\s*\d+\s*页(?:\s*[,，/]?\s*共\s*\d+\s*页)?|[ivxlcdm]{1,6})$",
    re.IGNORECASE,
)


@dataclass
class _Word:
    text: str
    x0: float
    top: float
    x1: float
    bottom: float
    chars: list[tuple[str, tuple[float, float, float, float]]]

    @property
    def height(self) -> float:
        return max(self.bottom - self.top, 0.1)


@dataclass
class _Line:
    words: list[_Word] = field(default_factory=list)

    @property
    def top(self) -> float:
        return min(w.top for w in self.words)

    @property
    def bottom(self) -> float:
        return max(w.bottom for w in self.words)

    @property
    def x0(self) -> float:
        return min(w.x0 for w in self.words)

    @property
    def x1(self) -> float:
        return max(w.x1 for w in self.words)

    @property
    def text(self) -> str:
        return " ".join(w.text for w in self.words)

    def bbox(self) -> tuple[float, float, float, float]:
        return (round(self.x0, 2), round(self.top, 2), round(self.x1, 2), round(self.bottom, 2))


def _words_of(page) -> list[_Word]:
    words = []
    for w in page.extract_words(keep_blank_chars=False, use_text_flow=False, return_chars=True, x_tolerance_ratio=0.15):
        chars = []
        for c in w.get("chars", []):
            t = c.get("text", "")
            t = "".join(_LIGATURES.get(ch, ch) for ch in t)
            box = (float(c["x0"]), float(c["top"]), float(c["x1"]), float(c["bottom"]))
            for ch in t:
                if ch.isspace():
                    continue
                chars.append((ch, box))
        if not chars:
            continue
        words.append(
            _Word("".join(ch for ch, _ in chars), float(w["x0"]), float(w["top"]), float(w["x1"]), float(w["bottom"]), chars)
        )
    return words


def _split_line_numbers(words: list[_Word]) -> tuple[list[_Word], list[_Word]]:
    """Set aside margin/gutter line numbers: >= 4 small integers in one narrow x band, increasing
    down the page with a constant step, each alone on its line."""
    numeric = [w for w in words if w.text.isdigit() and len(w.text) <= 3]
    if len(numeric) < 4:
        return words, []
    bands: dict[int, list[_Word]] = {}
    for w in numeric:
        bands.setdefault(round((w.x0 + w.x1) / 2 / 6), []).append(w)
    found: set[int] = set()
    merged: list[list[_Word]] = []
    for key in sorted(bands):
        if merged and key - merged[-1][0] <= 1:
            merged[-1][1].extend(bands[key])
            merged[-1][0] = key
        else:
            merged.append([key, list(bands[key])])
    for _, group in merged:
        group = sorted(group, key=lambda w: w.top)
        if len(group) < 4:
            continue
        values = [int(w.text) for w in group]
        steps = {b - a for a, b in zip(values, values[1:], strict=False)}
        if len(steps) != 1 or next(iter(steps)) not in (1, 2, 5, 10):
            continue
        # a constant pitch: the distance down the page per unit of the number stays the same
        pitch = [(b.top - a.top) / (int(b.text) - int(a.text)) for a, b in zip(group, group[1:], strict=False)]
        if min(pitch) <= 0 or max(pitch) > 1.15 * min(pitch):
            continue
        # each number stands alone: no other word close to it on its line
        if all(_isolated(w, words) for w in group):
            found.update(id(w) for w in group)
    if not found:
        return words, []
    return [w for w in words if id(w) not in found], [w for w in words if id(w) in found]


def _isolated(w: _Word, words: list[_Word]) -> bool:
    gap = 2.0 * w.height
    for o in words:
        if o is w or o.bottom < w.top or o.top > w.bottom:
            continue
        if o.x1 > w.x0 - gap and o.x0 < w.x1 + gap:
            return False
    return True


def _group_lines(words: list[_Word]) -> list[_Line]:
    """Words into lines by vertical position. A raised small word (a superscript footnote marker)
    that sorts before its line joins it: either middle lies within the other's vertical extent."""
    lines: list[_Line] = []
    for w in sorted(words, key=lambda w: (w.top, w.x0)):
        mid = (w.top + w.bottom) / 2
        for line in reversed(lines[-3:]):
            lh = line.bottom - line.top
            overlap = min(line.bottom, w.bottom) - max(line.top, w.top)
            small = min(lh, w.height) < 0.8 * max(lh, w.height)
            inside = line.top - 0.5 <= mid <= line.bottom + 0.5 or (small and overlap >= 0.3 * min(lh, w.height))
            if inside and abs(line.top - w.top) <= 0.6 * max(w.height, line.bottom - line.top):
                line.words.append(w)
                break
        else:
            lines.append(_Line([w]))
    for line in lines:
        line.words.sort(key=lambda w: w.x0)
    return lines


def _side_segments(line: _Line, x: float) -> tuple[list[_Word], list[_Word]]:
    return [w for w in line.words if w.x1 <= x], [w for w in line.words if w.x0 >= x]


def _fill(words: list[_Word], lo: float, hi: float) -> float:
    """Share of the band [lo, hi] that a line segment spans (1.0 for a full justified line)."""
    if not words or hi <= lo:
        return 0.0
    return (max(w.x1 for w in words) - min(w.x0 for w in words)) / (hi - lo)


def _is_prose(segments: list[list[_Word]]) -> bool:
    """Whether line segments read as running text rather than table cells: at least as many
    segments of words separated by word spaces (or one long run of CJK text) as segments with a
    gap wider than 1.5 x the word height."""
    prose = table = 0
    for seg in segments:
        seg = sorted(seg, key=lambda w: w.x0)
        gaps = [b.x0 - a.x1 for a, b in zip(seg, seg[1:], strict=False)]
        height = statistics.median(w.height for w in seg)
        if gaps and max(gaps) > 1.5 * height:
            table += 1
        elif len(seg) >= 3 or sum(len(w.text) for w in seg) >= 8:
            prose += 1
    return prose > 0 and prose >= table


def _find_gutter(lines: list[_Line], width: float) -> float | None:
    """x of a vertical gap that splits most lines into two text columns, or None.

    A table (short cells separated by wide gaps) is not two columns: on the lines holding text on
    both sides of the gap, the typical segment must fill most of its column's width.
    """
    if len(lines) < 8 or width <= 0:
        return None
    words = [w for line in lines for w in line.words]
    x_min = min(w.x0 for w in words)
    x_max = max(w.x1 for w in words)
    x0s = np.array([w.x0 for w in words])
    x1s = np.array([w.x1 for w in words])
    line_of = np.array([k for k, line in enumerate(lines) for _ in line.words])
    best = None
    for x in np.arange(0.3 * width, 0.7 * width, 2.0):
        cross = (x0s < x) & (x < x1s)
        crossing = int(np.count_nonzero(cross))
        left = int(np.count_nonzero(x1s <= x))
        right = len(words) - left - crossing
        if left <= 0.08 * len(words) or right <= 0.08 * len(words):
            continue
        # full-width lines (titles, captions, headers) may cross; CJK lines are few long "words",
        # so crossing is also judged by lines
        few_crossing = crossing <= 0.02 * len(words) or len(np.unique(line_of[cross])) <= 0.25 * len(lines)
        if few_crossing and left > 0.08 * len(words) and right > 0.08 * len(words):
            # both sides must hold text on many lines at the same height (true columns)
            both = [_side_segments(ln, x) for ln in lines]
            both = [(lw, rw) for lw, rw in both if lw and rw]
            if len(both) < 0.3 * len(lines) or (best is not None and crossing >= best[1]):
                continue
            gap_l = max(max(w.x1 for w in lw) for lw, _ in both)
            gap_r = min(min(w.x0 for w in rw) for _, rw in both)
            # each column is wide enough for running text (>= 12 character heights)
            size = statistics.median(w.height for w in words)
            # a gutter is wider than a word space: lines that repeat the same words ("..., characterized
            # in that") can line their word spaces up without being two columns
            if statistics.median(min(w.x0 for w in rw) - max(w.x1 for w in lw) for lw, rw in both) < 0.8 * size:
                continue
            if gap_l - x_min < 12 * size or x_max - gap_r < 12 * size:
                continue
            fill_l = statistics.median(_fill(lw, x_min, gap_l) for lw, _ in both)
            fill_r = statistics.median(_fill(rw, gap_r, x_max) for _, rw in both)
            if fill_l >= 0.6 and fill_r >= 0.6 and _is_prose([lw for lw, _ in both] + [rw for _, rw in both]):
                best = (float(x), crossing)
    return best[0] if best else None


def _find_side_column(lines: list[_Line], width: float) -> tuple[str, float, float, float] | None:
    """A narrow column of text beside the body (a margin column: "Edited by / Received / DOI",
    marginal notes): ("left"|"right", x of the gap, top, bottom of the band it occupies), or None.

    Within the band no word crosses the gap, the gap is clear whitespace (>= 8 pt), the narrow
    side holds >= 3 lines mostly of words (not equation numbers) and the body side >= 3 lines.
    """
    if len(lines) < 6 or width <= 0:
        return None
    words = [w for ln in lines for w in ln.words]
    x0s = np.array([w.x0 for w in words])
    x1s = np.array([w.x1 for w in words])
    tops = np.array([w.top for w in words])
    bottoms = np.array([w.bottom for w in words])
    for side in ("left", "right"):
        xs = np.arange(0.08 * width, 0.36 * width, 2.0) if side == "left" else np.arange(0.92 * width, 0.64 * width, -2.0)
        for x in xs:
            mask = x1s <= x - 4 if side == "left" else x0s >= x + 4
            if mask.sum() < 3:
                continue
            top = float(tops[mask].min())
            bottom = float(bottoms[mask].max())
            in_band = (bottoms > top) & (tops < bottom)
            if np.any(in_band & (x0s < x + 4) & (x1s > x - 4)):
                continue
            narrow = [w for w, m in zip(words, mask, strict=True) if m]
            band = [w for w, b in zip(words, in_band, strict=True) if b]
            narrow_lines = {round(w.top) for w in narrow}
            body = [w for w in band if w not in narrow]
            body_lines = {round(w.top) for w in body}
            letters = sum(1 for w in narrow if sum(c.isalpha() for c in w.text) >= 2)
            if len(narrow_lines) < 3 or len(body_lines) < 3 or letters < 0.5 * len(narrow):
                continue
            # the body beside it is running text (lines filling the body's width), not table cells
            b0, b1 = min(w.x0 for w in body), max(w.x1 for w in body)
            rows: dict[int, list[_Word]] = {}
            for w in body:
                rows.setdefault(round(w.top), []).append(w)
            full = statistics.median(_fill(r, b0, b1) for r in rows.values()) >= 0.6
            if full and b1 - b0 > 0.4 * width and _is_prose(list(rows.values())):
                return side, float(x), top, bottom
    return None


def _two_columns(lines: list[_Line], width: float) -> list[_Line]:
    """Split at a two-column gutter, band by band: lines that cross the gutter (or bridge it with an
    ordinary word space, like a centred title) separate bands; a band is read column by column only
    when its text on both sides is running text (not the cells of a table under the columns)."""
    gutter = _find_gutter(lines, width)
    if gutter is None:
        return lines
    gaps = []
    for ln in lines:
        lw, rw = _side_segments(ln, gutter)
        if lw and rw:
            gaps.append(min(w.x0 for w in rw) - max(w.x1 for w in lw))
    typical_gap = statistics.median(gaps) if gaps else 0.0

    def spanning(ln: _Line) -> bool:
        if any(w.x0 < gutter < w.x1 for w in ln.words):
            return True
        lw, rw = _side_segments(ln, gutter)
        if not (lw and rw):
            return False
        gap = min(w.x0 for w in rw) - max(w.x1 for w in lw)
        return gap < min(0.5 * typical_gap, 0.8 * max(w.height for w in ln.words))  # a word space

    ordered: list[_Line] = []
    band: list[_Line] = []

    def flush() -> None:
        segments = [seg for ln in band for seg in _side_segments(ln, gutter) if seg]
        both = sum(1 for ln in band if all(_side_segments(ln, gutter)))
        if both >= 2 and _is_prose(segments):
            left = [_Line(lw) for ln in band if (lw := _side_segments(ln, gutter)[0])]
            right = [_Line(rw) for ln in band if (rw := _side_segments(ln, gutter)[1])]
            ordered.extend(left + right)
        else:
            ordered.extend(band)
        band.clear()

    for line in lines:
        if spanning(line):
            flush()
            ordered.append(line)
        else:
            band.append(line)
    flush()
    return ordered


def _reading_order(lines: list[_Line], width: float) -> list[_Line]:
    """Lines in reading order: a narrow side column, if any, is read as one block (left: before the
    body lines beside it; right: after them), then the body is split at a two-column gutter."""
    side = _find_side_column(lines, width)
    if side is None:
        return _two_columns(lines, width)
    where, x, top, bottom = side
    margin: list[_Line] = []
    body: list[_Line] = []
    for line in lines:
        mw = [w for w in line.words if (w.x1 <= x if where == "left" else w.x0 >= x) and w.bottom > top and w.top < bottom]
        rest = [w for w in line.words if w not in mw]
        if mw:
            margin.append(_Line(mw))
        if rest:
            body.append(_Line(rest))
    body = _two_columns(body, width)
    if where == "left":
        i = next((k for k, ln in enumerate(body) if ln.bottom > top), len(body))
    else:
        i = next((k for k, ln in enumerate(body) if ln.top >= bottom), len(body))
    return body[:i] + margin + body[i:]


def _norm_furniture(text: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"\d+", "#", text)).strip().lower()


def _furniture_key(line: _Line) -> tuple[str, int]:
    """Running headers repeat with the same words (numbers aside) at the same height."""
    return _norm_furniture(line.text), round(line.top / 4)


def _split_furniture(pages_lines: list[list[_Line]], heights: list[float]) -> list[list[tuple[_Line, str | None]]]:
    """Tag each line with a furniture kind (header/footer/page_number) or None."""
    n = len(pages_lines)
    counts: Counter[str] = Counter()
    for lines, h in zip(pages_lines, heights, strict=True):
        seen = set()
        for ln in lines[:2] + lines[-2:]:
            if ln.top < 0.12 * h or ln.bottom > 0.88 * h:
                seen.add(_furniture_key(ln))
        counts.update(seen)
    threshold = max(2, (n + 1) // 2)
    tagged = []
    for lines, h in zip(pages_lines, heights, strict=True):
        out = []
        for i, ln in enumerate(lines):
            kind = None
            edge = i < 2 or i >= len(lines) - 2
            top_zone, bottom_zone = ln.top < 0.12 * h, ln.bottom > 0.88 * h
            if edge and (top_zone or bottom_zone):
                text = ln.text.strip()
                if _PAGE_NUMBER.match(text) and n >= 1 and (n >= 2 or bottom_zone):
                    kind = "page_number"
                elif n >= 2 and counts[_furniture_key(ln)] >= threshold:
                    kind = "header" if top_zone else "footer"
            out.append((ln, kind))
        tagged.append(out)
    return tagged


def _open_failure(exc: BaseException) -> str:
    """The reason a PDF could not be opened, looking through pdfplumber's wrapping exception."""
    from pdfminer.pdfdocument import PDFEncryptionError, PDFPasswordIncorrect

    seen: list[BaseException] = []
    todo: list[object] = [exc]
    while todo:
        e = todo.pop()
        if not isinstance(e, BaseException) or e in seen:
            continue
        seen.append(e)
        todo += [e.__cause__, e.__context__, *e.args]
    for e in seen:
        text = f"{type(e).__name__} {e}".lower()
        if isinstance(e, PDFPasswordIncorrect | PDFEncryptionError) or "password" in text or "encrypt" in text:
            return "encrypted PDF: a password is needed to read it"
    detail = next((str(e) for e in reversed(seen) if str(e).strip()), type(exc).__name__)
    return f"broken PDF ({detail.strip().splitlines()[0][:160]})"


MAX_PAGE_OBJECTS = 200_000  # text, path and image objects on one page (a dense scatter plot: tens of thousands)
MAX_PAGE_CHARS = 100_000  # characters on one page (a page of 6-point text: about 20,000)


def check_pages(data: bytes, name: str) -> None:
    """Refuse (one-line IngestError naming the page) a PDF with a page past `MAX_PAGE_OBJECTS`
    objects or `MAX_PAGE_CHARS` characters, counted by PDFium (C++, about 2 ms a page) before
    pdfminer builds a Python object per glyph: a 29 KB page of 300,000 "(AAAAAAAAAA) Tj" took pdfminer
    past 150 s and 2.7 GB; PDFium counts its 3,000,000 characters in under 2 s. A file PDFium cannot
    open is left to pdfplumber, which says why."""
    from pipelines.documents.ingest import IngestError

    try:
        import pypdfium2 as pdfium
        import pypdfium2.raw as raw

        pdf = pdfium.PdfDocument(data)
    except Exception:
        return
    try:
        for i in range(len(pdf)):
            page = pdf[i]
            try:
                n_obj = raw.FPDFPage_CountObjects(page)
                if n_obj > MAX_PAGE_OBJECTS:
                    raise IngestError(name, f"page {i + 1} holds {n_obj:,} objects, over the limit of "
                                            f"{MAX_PAGE_OBJECTS:,} per page")
                tp = page.get_textpage()
                try:
                    n_chars = tp.count_chars()
                finally:
                    tp.close()
                if n_chars > MAX_PAGE_CHARS:
                    raise IngestError(name, f"page {i + 1} holds {n_chars:,} characters, over the limit of "
                                            f"{MAX_PAGE_CHARS:,} per page (a real page holds a few thousand)")
            finally:
                page.close()
    finally:
        pdf.close()


_INLINE_IMAGE = re.compile(rb"\bBI\b.*?\bID\b.*?\bEI\b", re.DOTALL)
_LITERAL = re.compile(rb"\((?:\\.|[^\\()])*\)", re.DOTALL)
_HEX = re.compile(rb"<[0-9A-Fa-f\s]*>")


def shown_string_bytes(page) -> int:
    """An upper bound on the glyphs a page's content streams show: the bytes of their literal
    strings and half those of their hex strings (inline images left out), read from the decoded
    streams in one regex pass each (PDFium stops counting a string at 32,767 characters; pdfminer
    makes a Python object per glyph)."""
    from pdfminer.pdftypes import resolve1

    contents = resolve1(page.page_obj.attrs.get("Contents"))
    streams = contents if isinstance(contents, list) else [contents]
    total = 0
    for ref in streams:
        st = resolve1(ref)
        try:
            data = st.get_data()
        except Exception:
            continue
        data = _INLINE_IMAGE.sub(b"", data)
        total += sum(len(m) - 2 for m in _LITERAL.findall(data))
        total += sum((len(m) - 2) // 2 for m in _HEX.findall(data))
    return total


def load_pdf(data: bytes, name: str, doc_id: str, max_pages: int = 2000) -> Document:
    import pdfplumber

    from pipelines.documents.ingest import IngestError

    if not data.lstrip()[:5].startswith(b"%PDF"):
        raise IngestError(name, "not a PDF file (no %PDF header)")
    try:
        pdf = pdfplumber.open(io.BytesIO(data))
    except Exception as exc:
        raise IngestError(name, _open_failure(exc)) from None
    with pdf:
        try:
            n_pages = len(pdf.pages)
        except Exception as exc:
            raise IngestError(name, f"broken PDF ({str(exc)[:160] or type(exc).__name__})") from None
        if n_pages == 0:
            raise IngestError(name, "PDF has no pages")
        if n_pages > max_pages:
            raise IngestError(name, f"PDF has {n_pages} pages, over the {max_pages}-page limit")
        check_pages(data, name)
        pages_lines: list[list[_Line]] = []
        numbers: list[list[_Word]] = []
        sizes: list[tuple[float, float]] = []
        for pno, page in enumerate(pdf.pages, start=1):
            shown = shown_string_bytes(page)
            if shown > MAX_PAGE_CHARS:
                raise IngestError(name, f"page {pno} shows up to {shown:,} characters, over the limit of "
                                        f"{MAX_PAGE_CHARS:,} per page (a real page holds a few thousand)")
            words = _words_of(page)
            words, line_numbers = _split_line_numbers(words)
            lines = _reading_order(_group_lines(words), float(page.width))
            pages_lines.append(lines)
            numbers.append(line_numbers)
            sizes.append((float(page.width), float(page.height)))
    if not any(pages_lines):
        raise IngestError(name, "PDF has no text layer (a scanned image?); OCR is not supported")

    tagged = _split_furniture(pages_lines, [h for _, h in sizes])
    text_parts: list[str] = []
    boxes: list[tuple[float, float, float, float]] = []
    nan = (np.nan, np.nan, np.nan, np.nan)
    pages: list[Page] = []
    furniture: list[Furniture] = []
    empty_pages: list[int] = []
    pos = 0

    def emit(s: str, box=nan) -> None:
        nonlocal pos
        text_parts.append(s)
        boxes.extend([box] * len(s))
        pos += len(s)

    for pno, (lines, line_numbers, (width, height)) in enumerate(zip(tagged, numbers, sizes, strict=True), start=1):
        if pno > 1:
            emit("\n")
        start = pos
        body = [ln for ln, kind in lines if kind is None]
        furniture += [Furniture(kind, pno, ln.text, ln.bbox()) for ln, kind in lines if kind is not None]
        furniture += [Furniture("line_number", pno, w.text, (w.x0, w.top, w.x1, w.bottom)) for w in line_numbers]
        if not body:
            empty_pages.append(pno)
        spacing = [b.top - a.top for a, b in zip(body, body[1:], strict=False) if b.top > a.top]
        typical = statistics.median(spacing) if spacing else 0.0
        prev: _Line | None = None
        for ln in body:
            if prev is not None:
                gap = ln.top - prev.top
                emit("\n\n" if typical and gap > 1.6 * typical else "\n")
            last = ""
            for w in ln.words:
                if last and not (is_cjk_wide(last) and is_cjk_wide(w.text[0])):
                    emit(" ")
                for ch, box in w.chars:
                    emit(ch, box)
                last = w.text[-1]
            prev = ln
        pages.append(Page(pno, start, pos, width, height))
    text = "".join(text_parts)
    doc = Document(
        doc_id=doc_id,
        text=text,
        pages=pages,
        source_name=name.rsplit("/", 1)[-1],
        source_format="pdf",
        char_boxes=np.asarray(boxes, dtype=np.float32).reshape(-1, 4),
        furniture=furniture,
    )
    if empty_pages:
        doc.metadata["pages_without_text"] = ",".join(map(str, empty_pages))
    return doc
