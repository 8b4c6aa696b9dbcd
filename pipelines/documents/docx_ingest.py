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


def _paragraph_num(p) -> tuple[str, int] | None:
    """(numId, level) of a paragraph: its own numPr, else its style's (following base styles)."""
    ppr = p._p.pPr
    num_pr = ppr.numPr if ppr is not None else None
    style = p.style
    ilvl_val = None
    if num_pr is not None and num_pr.ilvl is not None:
        ilvl_val = int(num_pr.ilvl.val)
    depth = 0
    while (num_pr is None or num_pr.numId is None) and style is not None and depth < 10:
        sppr = style.element.pPr
        if sppr is not None and sppr.numPr is not None:
            num_pr = sppr.numPr
            if ilvl_val is None and num_pr.ilvl is not None:
                ilvl_val = int(num_pr.ilvl.val)
        style = style.base_style
        depth += 1
    if num_pr is None or num_pr.numId is None or num_pr.numId.val == 0:
        return None
    return str(num_pr.numId.val), ilvl_val or 0


def load_docx(data: bytes, name: str, doc_id: str, limits: IngestLimits | None = None) -> Document:
    import docx
    from docx.table import Table
    from docx.text.paragraph import Paragraph

    check_docx_zip(data, name, limits or IngestLimits())
    document = docx.Document(io.BytesIO(data))
    numbering = _Numbering(document)
    blocks: list[str] = []
    for child in document.element.body.iterchildren():
        if child.tag == f"{_W}p":
            p = Paragraph(child, document)
            text = p.text
            num = _paragraph_num(p)
            if num is not None:
                label = numbering.label(*num)
                if label and text.strip():
                    text = f"{label} {text}" if not label.endswith(("、", "\t")) else label.rstrip("\t") + text
            blocks.append(text)
        elif child.tag == f"{_W}tbl":
            table = Table(child, document)
            for row in table.rows:
                cells = []
                for cell in row.cells:
                    t = " ".join(cell.text.split())
                    if not cells or cells[-1] != t:  # merged cells repeat
                        cells.append(t)
                blocks.append("\t".join(cells))
    text = "\n".join(blocks)
    return Document.from_text(text, doc_id=doc_id, source_name=name.rsplit("/", 1)[-1], source_format="docx")
