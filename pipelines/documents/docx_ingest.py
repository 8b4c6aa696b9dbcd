"""DOCX ingest with python-docx: body paragraphs and tables in document order, with the list
numbering Word would display ("1.", "1.1", "(a)", "第一条") rendered into the text.

python-docx exposes a paragraph's numbering only as (numId, ilvl); the shown label is computed
here from numbering.xml (abstract numbering levels: start, numFmt, lvlText, restart of deeper
levels), the way Word counts. A level's start value is bounded (`MAX_LIST_NUMBER`), and numbers
past what a numbering system writes (Roman past 3,999, Chinese past 10^8) are written in decimal,
so a forged numbering cannot hang.

Before python-docx opens the file, the zip is checked (`check_docx_zip`): the declared
uncompressed size of every part, then the bytes each part actually decompresses to (read in
bounded chunks, so a part that lies about its size is caught at its limit, not after it), against
`IngestLimits.max_docx_part_bytes` (any one part) and `max_docx_unpacked_bytes` (all together).
python-docx reads every part a relationship points at, so a huge part is refused here, unread.
"""

from __future__ import annotations

import io
import re
import zipfile

from pipelines.documents.ingest import IngestError, IngestLimits
from pipelines.documents.model import Document
from pipelines.text.numerals import int_to_chinese, int_to_roman

_W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"

# A list level's start value past this (or not a number) is ignored: the level starts at 1. Word's
# own dialog stops at 32,767; numbers past a numbering system's range are written in decimal.
MAX_LIST_NUMBER = 10**15 - 1
_CHUNK = 1 << 20


def check_docx_zip(data: bytes, name: str, limits: IngestLimits) -> None:
    """Refuse (one-line IngestError) a .docx whose parts unpack past the limits; see the module doc."""
    try:
        zf = zipfile.ZipFile(io.BytesIO(data))
    except zipfile.BadZipFile as exc:
        raise IngestError(name, f"cannot be parsed as docx ({exc})") from None
    with zf:
        infos = zf.infolist()
        declared = 0
        for info in infos:
            if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
                raise IngestError(name, f"zip part {info.filename!r} uses compression method {info.compress_type},"
                                        " which Word does not write")
            _check_part(name, info.filename, info.file_size, limits)
            declared += info.file_size
        if declared > limits.max_docx_unpacked_bytes:
            raise _too_big(name, "its parts", declared, limits.max_docx_unpacked_bytes)
        total = 0
        for info in infos:
            if info.is_dir():
                continue
            part = 0
            try:
                with zf.open(info) as fh:
                    # at most one chunk past the declared size: zipfile stops at the declared size
                    while chunk := fh.read(_CHUNK):
                        part += len(chunk)
                        total += len(chunk)
                        _check_part(name, info.filename, part, limits)
                        if total > limits.max_docx_unpacked_bytes:
                            raise _too_big(name, "its parts", total, limits.max_docx_unpacked_bytes)
            except IngestError:
                raise
            except Exception as exc:  # bad CRC, truncated data, a size that lied
                reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
                raise IngestError(name, f"cannot be parsed as docx (zip part {info.filename!r}: {reason[:120]})") from None
        _check_counts(zf, name)


# what the XML of a .docx may hold before it is parsed (counted on the bytes: no parser runs)
MAX_DOCX_ELEMENTS = 400_000  # paragraphs, table rows and cells in word/document.xml (a 500-page contract: ~20,000)
MAX_DOCX_STYLES = 20_000  # styles in word/styles.xml (Word's own templates: a few hundred)
_ELEMENT = re.compile(rb"<w:(?:p|tr|tc)(?=[\s/>])")
_STYLE = re.compile(rb"<w:style(?=[\s/>])")


def _check_counts(zf: zipfile.ZipFile, name: str) -> None:
    """Refuse a .docx whose body or styles hold more elements than a document of the size limits
    could (63 MB of empty paragraphs, 200,000 chained styles): counted on the raw XML, before
    python-docx or lxml builds a tree of them."""
    for part, pattern, limit, what in (("word/document.xml", _ELEMENT, MAX_DOCX_ELEMENTS, "paragraphs, rows and cells"),
                                       ("word/styles.xml", _STYLE, MAX_DOCX_STYLES, "styles")):
        try:
            data = zf.read(part)
        except KeyError:
            continue
        n = sum(1 for _ in pattern.finditer(data))
        if n > limit:
            raise IngestError(name, f"{part} holds {n:,} {what}, over the limit of {limit:,} for .docx")


def _check_part(name: str, part: str, size: int, limits: IngestLimits) -> None:
    limit = min(limits.max_docx_part_bytes, limits.max_docx_unpacked_bytes)
    if size > limit:
        raise _too_big(name, f"zip part {part!r}", size, limit)


def _too_big(name: str, what: str, size: int, limit: int) -> IngestError:
    return IngestError(name, f"{what} unpack to {size / 1e6:.1f} MB or more, over the {limit / 1e6:.0f} MB limit for .docx")


def _start_value(value: str | None) -> int:
    n = _int(value, 1)
    return 1 if n > MAX_LIST_NUMBER else max(n, 0)


def _int(value: str | None, default: int) -> int:
    try:
        return int(value) if value is not None and len(value) <= 20 else default
    except ValueError:
        return default


def _letter(n: int) -> str:
    s = ""
    while n > 0:
        n, r = divmod(n - 1, 26)
        s = chr(97 + r) + s
    return s


def format_number(n: int, fmt: str) -> str:
    if fmt in ("decimal", "decimalZero"):
        return f"{n:02d}" if fmt == "decimalZero" else str(n)
    if fmt == "lowerLetter":
        return _letter(n)
    if fmt == "upperLetter":
        return _letter(n).upper()
    if fmt in ("lowerRoman", "upperRoman"):  # past ROMAN_MAX int_to_roman writes decimal
        return int_to_roman(n, upper=fmt == "upperRoman") if n > 0 else str(n)
    if fmt in ("chineseCounting", "chineseCountingThousand", "chineseLegalSimplified", "ideographTraditional", "taiwaneseCounting"):
        return int_to_chinese(n) if 0 < n < 100_000_000 else str(n)
    if fmt == "decimalFullWidth":
        return "".join(chr(ord(c) + 0xFEE0) for c in str(n))
    if fmt == "bullet":
        return ""
    return str(n)


class _Numbering:
    def __init__(self, document) -> None:
        self.levels: dict[tuple[str, int], tuple[int, str, str]] = {}
        self.counters: dict[str, list[int]] = {}
        try:
            part = document.part.numbering_part
        except Exception:
            return
        root = part.element
        abstract: dict[str, dict[int, tuple[int, str, str]]] = {}
        for an in root.iter(f"{_W}abstractNum"):
            aid = an.get(f"{_W}abstractNumId")
            lv = {}
            for lvl in an.iter(f"{_W}lvl"):
                ilvl = _int(lvl.get(f"{_W}ilvl"), 0)
                if not 0 <= ilvl < 9:
                    continue
                start = lvl.find(f"{_W}start")
                fmt = lvl.find(f"{_W}numFmt")
                text = lvl.find(f"{_W}lvlText")
                lv[ilvl] = (
                    _start_value(start.get(f"{_W}val")) if start is not None else 1,
                    fmt.get(f"{_W}val", "decimal") if fmt is not None else "decimal",
                    text.get(f"{_W}val", "") if text is not None else "",
                )
            abstract[aid] = lv
        for num in root.iter(f"{_W}num"):
            nid = num.get(f"{_W}numId")
            ref = num.find(f"{_W}abstractNumId")
            if ref is None:
                continue
            for ilvl, spec in abstract.get(ref.get(f"{_W}val"), {}).items():
                self.levels[(nid, ilvl)] = spec

    def label(self, num_id: str, ilvl: int) -> str:
        if (num_id, ilvl) not in self.levels:
            return ""
        counters = self.counters.setdefault(num_id, [0] * 9)
        start = self.levels[(num_id, ilvl)][0]
        counters[ilvl] = counters[ilvl] + 1 if counters[ilvl] else start
        for deeper in range(ilvl + 1, 9):
            counters[deeper] = 0
        _, fmt, text = self.levels[(num_id, ilvl)]
        if fmt == "bullet":
            return "•"
        out = text
        for lv in range(ilvl + 1):
            spec = self.levels.get((num_id, lv))
            value = counters[lv] or (spec[0] if spec else 1)
            out = out.replace(f"%{lv + 1}", format_number(value, spec[1] if spec else "decimal"))
        return out


class _Styles:
    """Each paragraph style's list numbering (numId, ilvl), following its base styles (at most 10
    deep, a cycle stopped): one pass over styles.xml, so a large styles part costs a dict lookup per
    paragraph, not a search."""

    def __init__(self, document) -> None:
        self.own: dict[str, tuple[str | None, int | None, str | None]] = {}
        try:
            root = document.part.styles.element
        except Exception:
            return
        for st in root.iterchildren(f"{_W}style"):
            sid = st.get(f"{_W}styleId")
            if sid is None:
                continue
            num_id = ilvl = None
            ppr = st.find(f"{_W}pPr")
            npr = ppr.find(f"{_W}numPr") if ppr is not None else None
            if npr is not None:
                n = npr.find(f"{_W}numId")
                lv = npr.find(f"{_W}ilvl")
                num_id = n.get(f"{_W}val") if n is not None else None
                ilvl = _int(lv.get(f"{_W}val"), 0) if lv is not None else None
            based = st.find(f"{_W}basedOn")
            self.own[sid] = (num_id, ilvl, based.get(f"{_W}val") if based is not None else None)

    def numbering(self, style_id: str | None) -> tuple[str | None, int | None]:
        num_id, ilvl, seen = None, None, set()
        while style_id is not None and style_id not in seen and len(seen) < 10:
            seen.add(style_id)
            n, lv, based = self.own.get(style_id, (None, None, None))
            if ilvl is None and lv is not None:
                ilvl = lv
            if n is not None:
                return n, ilvl
            style_id = based
        return num_id, ilvl


def _paragraph_num(p, styles: _Styles) -> tuple[str, int] | None:
    """(numId, level) of a paragraph: its own numPr, else its style's (following base styles)."""
    ppr = p.find(f"{_W}pPr")
    npr = ppr.find(f"{_W}numPr") if ppr is not None else None
    num_id = ilvl = None
    if npr is not None:
        n = npr.find(f"{_W}numId")
        lv = npr.find(f"{_W}ilvl")
        num_id = n.get(f"{_W}val") if n is not None else None
        ilvl = _int(lv.get(f"{_W}val"), 0) if lv is not None else None
    if num_id is None:
        ps = ppr.find(f"{_W}pStyle") if ppr is not None else None
        s_num, s_ilvl = styles.numbering(ps.get(f"{_W}val") if ps is not None else "Normal")
        num_id = s_num
        ilvl = ilvl if ilvl is not None else s_ilvl
    if num_id is None or num_id == "0":
        return None
    return num_id, ilvl or 0


_TEXT_TAGS = {f"{_W}t": None, f"{_W}tab": "\t", f"{_W}br": "\n", f"{_W}cr": "\n"}


def _para_text(p) -> str:
    """A paragraph's text as python-docx reads it (runs' text, tabs, breaks), without building objects."""
    out = []
    for el in p.iter(*_TEXT_TAGS):
        out.append(el.text or "" if el.tag == f"{_W}t" else _TEXT_TAGS[el.tag])
    return "".join(out)


_MAX_SPAN = 64  # a cell's gridSpan counts for at most this many columns (a forged 2,000,000,000 allocates nothing)


def _table_rows(tbl) -> list[str]:
    """Each row of a table as its cells' texts joined by tabs, read from the XML in one pass: a
    horizontally merged cell once, a vertically merged one with the text of the cell that starts
    the merge (as Word shows it), without python-docx's grid (which allocates a cell per spanned
    column and follows vertical merges by recursion)."""
    rows, above = [], {}  # grid column -> the text of the vertical merge that starts there
    for tr in tbl.iterchildren(f"{_W}tr"):
        cells, col = [], 0
        for tc in tr.iterchildren(f"{_W}tc"):
            tcpr = tc.find(f"{_W}tcPr")
            span = vmerge = None
            if tcpr is not None:
                span = tcpr.find(f"{_W}gridSpan")
                vmerge = tcpr.find(f"{_W}vMerge")
            width = min(max(_int(span.get(f"{_W}val"), 1), 1), _MAX_SPAN) if span is not None else 1
            if vmerge is not None and vmerge.get(f"{_W}val") != "restart":
                t = above.get(col, "")
            else:
                t = " ".join(" ".join(_para_text(p) for p in tc.iterchildren(f"{_W}p")).split())
                if vmerge is not None:
                    above[col] = t
                else:
                    above.pop(col, None)
            if not cells or cells[-1] != t:  # merged cells repeat
                cells.append(t)
            col += width
        rows.append("\t".join(cells))
    return rows


def load_docx(data: bytes, name: str, doc_id: str, limits: IngestLimits | None = None) -> Document:
    import docx

    check_docx_zip(data, name, limits or IngestLimits())
    document = docx.Document(io.BytesIO(data))
    numbering = _Numbering(document)
    styles = _Styles(document)
    blocks: list[str] = []
    for child in document.element.body.iterchildren():
        if child.tag == f"{_W}p":
            text = _para_text(child)
            num = _paragraph_num(child, styles)
            if num is not None:
                label = numbering.label(*num)
                if label and text.strip():
                    text = f"{label} {text}" if not label.endswith(("、", "\t")) else label.rstrip("\t") + text
            blocks.append(text)
        elif child.tag == f"{_W}tbl":
            blocks.extend(_table_rows(child))
    text = "\n".join(blocks)
    return Document.from_text(text, doc_id=doc_id, source_name=name.rsplit("/", 1)[-1], source_format="docx")
