"""Sections with their numbering, footnotes, the bibliography and its entries, numbered equations.

All found from the document's lines: a numbered heading is a short line that starts with a
section number ("2.3 Results", "第三节 …", "一、…", "A.1 …") and reads as a title; footnotes are
small-type lines at the foot of a page that start with a marker; the bibliography is what follows
a "References"/"参考文献" heading, split into entries at "[n]"/"n." markers or hanging indents; a
numbered equation is a short line ending in "(n)" that looks like mathematics.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pipelines.documents import Document, Span
from pipelines.reports.floats import is_prose, parse_caption_start
from pipelines.reports.labels import DOT_LEADER, norm_number
from pipelines.reports.layout import Layout, Line
from pipelines.text.numerals import parse_number
from pipelines.text.script import HAN_EXT

_NUM_HEADING = re.compile(r"^\s*(?P<num>(?:\d{1,2}|[A-Z])(?:\.\d{1,2}){0,3})\.?\s+(?P<title>[^\W\d_][^\n]{0,90})$")
_CN_CHAPTER = re.compile(r"^\s*第\s*(?P<num>[一二三四五六七八九十百零〇两\d]{1,4})\s*(?P<unit>[章节部分篇])\s*(?P<title>.{0,60})$")
_CN_ENUM = re.compile(r"^\s*(?P<num>[一二三四五六七八九十]{1,3})\s*[、．.]\s*(?P<title>\S.{0,60})$")
_APPENDIX = re.compile(r"^\s*(?:Appendix|附录)\s*(?P<num>[A-Z]|\d{1,2})\b\s*[:.：]?\s*(?P<title>.{0,80})$", re.IGNORECASE)
_BIB_HEADING = re.compile(r"^\s*(?:\d{1,2}\.?\s+|[一二三四五六七八九十]+[、.]\s*)?(?:References|REFERENCES|Bibliography|BIBLIOGRAPHY|Works Cited|Literature Cited|参考文献|参 考 文 献)\s*$")
_BIB_NUM = re.compile(r"^\s*(?:\[(?P<a>\d{1,3})\]|(?P<b>\d{1,3})\.\s)")
_FOOT_MARK = re.compile(r"^\s*(?P<m>\d{1,2}|[*†‡§¶]|[①-⑳])\s*(?=[^\W\d_])")
_EQ_NUM = re.compile(r"[(（]\s*(?P<num>(?:\d{1,3}|[A-Z])(?:[\u00ad\-–.．]\d{1,3})?[a-z]?)\s*[)）]\s*$")
_MATHY = re.compile(r"[=+−×·∑∫√≤≥≈∝∂∇λμσπθϕ^]|[\U0001D400-\U0001D7FF]")


@dataclass(frozen=True, slots=True, eq=False, kw_only=True)
class Item(Span):
    """A structural target before it becomes a `Target`: a `Span` of the document's text (heading,
    note, entry or equation number) labelled as printed ("2.3", "[12]", "(4)")."""

    kind: str  # section | footnote | reference | equation
    number: str
    page: int
    extra: dict


def find_sections(doc: Document, layout: Layout) -> list[Item]:
    out: list[Item] = []
    seen: set[str] = set()
    for i, ln in enumerate(layout.lines):
        text = ln.text.strip()
        if len(text) > 100 or DOT_LEADER.search(text) or parse_caption_start(text):
            continue
        m = _CN_CHAPTER.match(text)
        number = None
        if m:
            n = parse_number(m.group("num"), digit_by_digit=False)
            if n is None:
                continue
            number = f"{m.group('unit')}{n}"
            label = text[: m.end("unit")].strip()
        elif (m := _APPENDIX.match(text)) and len(text) < 60:
            number = f"appendix-{m.group('num').upper()}"
            label = text[: m.end("num")].strip()
        elif (m := _CN_ENUM.match(text)) and not text.endswith(("。", "；", "，")):
            number = f"cn{parse_number(m.group('num'), digit_by_digit=False)}"
            label = m.group("num")
        elif (m := _NUM_HEADING.match(text)):
            title = m.group("title").strip()
            if is_prose(layout, ln) or title.endswith((".", ",", ";", "。", "，")) or len(title.split()) > 14:
                continue
            if not re.search(rf"[A-Za-z{HAN_EXT}]{{2}}", title) or _MATHY.search(title):
                continue
            # a heading stands apart: larger type, or a gap / page start above it
            first = m.group("num").split(".")[0]
            if first.isdigit() and int(first) > 40:
                continue
            taller = layout.body_height and ln.height > 1.05 * layout.body_height
            if not (ln.blank_before or taller or i == 0 or layout.lines[i - 1].page != ln.page):
                continue
            number = m.group("num")
            label = number
        if number is None or number in seen:
            continue
        seen.add(number)
        out.append(Item(doc, ln.start, ln.end, label, kind="section", number=number, page=ln.page, extra={}))
    return out


def find_footnotes(doc: Document, layout: Layout, exclude: list[tuple[int, int]] | None = None) -> list[Item]:
    """Notes in small type at the foot of a page, starting with a marker followed by a word; every
    line below a note on its page is small type too. `exclude`: offset ranges (bibliography,
    figures) where no note is looked for."""
    out: list[Item] = []
    body = layout.body_height
    exclude = exclude or []
    if not body:
        return out
    for page, pl in layout.pages.items():
        lines = layout.lines_on(page)
        if not lines or not pl.height:
            continue
        notes: list[Item] = []
        for k, ln in enumerate(lines):
            if ln.bbox is None or ln.bbox[1] < 0.6 * pl.height or ln.height > 0.92 * body:
                continue
            if any(a <= ln.start < b for a, b in exclude):
                continue
            m = _FOOT_MARK.match(ln.text)
            if not m or parse_caption_start(ln.text):
                continue
            below = [x for x in lines if x.bbox and x.bbox[1] > ln.bbox[3]]
            if any(x.height > 0.92 * body for x in below):
                continue
            # the first note of a page stands apart from what is above it (a gap or a rule)
            above = [x for x in lines if x.bbox and x.bbox[3] <= ln.bbox[1] + 1 and x is not ln]
            prev = max(above, key=lambda x: x.bbox[3]) if above else None
            if prev is not None and prev.height > 0.92 * body:
                gap = ln.bbox[1] - prev.bbox[3]
                ruled = any(g[3] - g[1] < 2 and prev.bbox[3] - 1 <= g[1] <= ln.bbox[1] + 1 for g in pl.graphics)
                if gap < 0.8 * body and not ruled:
                    continue
            words = re.findall(rf"[A-Za-z]{{2,}}|[{HAN_EXT}]", ln.text)
            if len(words) < 3:
                continue
            # the note runs on over following small-type lines without a marker
            end = ln.end
            for nxt in lines[k + 1:k + 6]:
                if nxt.height > 0.92 * body or _FOOT_MARK.match(nxt.text) or nxt.blank_before:
                    break
                end = nxt.end
            mark = m.group("m")
            text = doc.text[ln.start:end]
            if len(text.strip()) <= len(mark) + 2:
                continue
            notes.append(Item(doc, ln.start, end, mark, kind="footnote", number=mark, page=page, extra={}))
        # notes of one page carry distinct markers, numbers increasing (else: code, a list, a table)
        marks = [n.number for n in notes]
        nums = [int(m) for m in marks if m.isdigit()]
        if len(set(marks)) == len(marks) and nums == sorted(nums):
            out.extend(notes)
    return out


def find_bibliography(doc: Document, layout: Layout) -> list[Item]:
    """Entries after the last "References"/"参考文献" heading that is followed by entries."""
    lines = layout.lines
    heads = [i for i, ln in enumerate(lines) if _BIB_HEADING.match(ln.text)]
    out: list[Item] = []
    numbers: set[str] = set()
    for k, h in enumerate(heads):
        stop = heads[k + 1] if k + 1 < len(heads) else len(lines)
        entries = _entries(doc, layout, lines[h + 1:stop])
        if len(entries) < 2:
            continue  # a table-of-contents line, or a heading with no list after it
        for e in entries:
            key = e.number or e.label
            if key not in numbers:
                numbers.add(key)
                out.append(e)
    return out


# a numbered entry runs over at most this many lines, and onto the next page only when its last
# line is unfinished; text after it (an unheaded appendix, a new page of body text) is not part of
# the last entry
_MAX_ENTRY_LINES = 8


def _entries(doc: Document, layout: Layout, lines: list[Line]) -> list[Item]:
    out: list[Item] = []
    numbered = sum(1 for ln in lines[:40] if _BIB_NUM.match(ln.text))
    indent_x = None
    if not numbered:
        xs = sorted(round(ln.bbox[0]) for ln in lines[:60] if ln.bbox)
        indent_x = xs[0] if xs else None
    cur: list[Line] = []

    def close() -> None:
        if not cur:
            return
        first = cur[0]
        m = _BIB_NUM.match(first.text)
        number = (m.group("a") or m.group("b")) if m else ""
        start, end = first.start, cur[-1].end
        text = re.sub(r"\s*\n\s*", " ", doc.text[start:end])
        out.append(Item(doc, start, end, f"[{number}]" if number else _short(text), kind="reference", number=number,
                        page=first.page, extra={}))
        cur.clear()

    for ln in lines:
        text = ln.text.strip()
        if _APPENDIX.match(text) or re.match(r"^\s*(?:致\s*谢|Acknowledg|附\s*录|Appendix|Supplementary)", text):
            break
        if numbered:
            if _BIB_NUM.match(ln.text):
                close()
                cur.append(ln)
            elif cur and len(cur) < _MAX_ENTRY_LINES and not ln.blank_before and (
                    ln.page == cur[-1].page or not cur[-1].text.rstrip().endswith((".", "。"))):
                cur.append(ln)
            else:  # a paragraph gap, a long run of lines, or a new page after a finished entry: not the entry
                close()
        else:
            starts = ln.bbox is not None and indent_x is not None and round(ln.bbox[0]) <= indent_x + 2
            if starts and (not cur or re.match(rf"^[A-Z{HAN_EXT}]", text)):
                close()
            cur.append(ln)
        if len(out) > 2000:
            break
    close()
    return out


def _short(text: str) -> str:
    m = re.match(r"^\s*([^,.(]{1,40})", text)
    year = re.search(r"\b(1[89]\d\d|20\d\d)[a-z]?\b", text)
    return f"{m.group(1).strip() if m else text[:20]} {year.group(0) if year else ''}".strip()


def find_equations(doc: Document, layout: Layout) -> list[Item]:
    out: list[Item] = []
    seen: set[str] = set()
    for ln in layout.lines:
        text = ln.text.strip()
        m = _EQ_NUM.search(text)
        if not m or len(text) > 160:
            continue
        body = text[: m.start()]
        if not _MATHY.search(body) or is_prose(layout, ln) and len(re.findall(r"[A-Za-z]{4,}", body)) > 4:
            continue
        number = norm_number(m.group("num"))
        if number in seen:
            continue
        seen.add(number)
        start = ln.start + ln.text.index(m.group(0).strip()) if m.group(0).strip() in ln.text else ln.start
        out.append(Item(doc, start, start + len(m.group(0).strip()), f"({m.group('num')})", kind="equation", number=number,
                        page=ln.page, extra={"line": (ln.start, ln.end)}))
    return out
