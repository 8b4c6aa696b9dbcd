"""DOCX ingest with python-docx: body paragraphs and tables in document order, with the list
numbering Word would display ("1.", "1.1", "(a)", "第一条") rendered into the text.

python-docx exposes a paragraph's numbering only as (numId, ilvl); the shown label is computed
here from numbering.xml (abstract numbering levels: start, numFmt, lvlText, restart of deeper
levels), the way Word counts.
"""

from __future__ import annotations

import io

from pipelines.documents.model import Document
from pipelines.text.numerals import int_to_chinese, int_to_roman

_W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"


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
    if fmt == "lowerRoman":
        return int_to_roman(n)
    if fmt == "upperRoman":
        return int_to_roman(n, upper=True)
    if fmt in ("chineseCounting", "chineseCountingThousand", "chineseLegalSimplified", "ideographTraditional", "taiwaneseCounting"):
        return int_to_chinese(n) if n > 0 else str(n)
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
                ilvl = int(lvl.get(f"{_W}ilvl", "0"))
                start = lvl.find(f"{_W}start")
                fmt = lvl.find(f"{_W}numFmt")
                text = lvl.find(f"{_W}lvlText")
                lv[ilvl] = (
                    int(start.get(f"{_W}val", "1")) if start is not None else 1,
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


def load_docx(data: bytes, name: str, doc_id: str) -> Document:
    import docx
    from docx.table import Table
    from docx.text.paragraph import Paragraph

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
