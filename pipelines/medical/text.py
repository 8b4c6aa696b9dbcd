"""Sentence spans (`Span`s labelled "sentence") for English and Chinese clinical text, and small helpers.

Clinical text wraps lines mid-sentence (dictated notes at ~75 columns), lists one item a line,
and mixes English and Chinese punctuation. A newline ends a sentence unless the text clearly
continues on the next line (next line starts in lower case, or a long line stops without
punctuation). Offsets always point into the original text.
"""

from __future__ import annotations

import re

from pipelines.documents import Document, Span
from pipelines.text.script import has_cjk

_END = re.compile(r"(?<![A-Z][a-z])(?<!\b[A-Za-z])(?<!\bDr)(?<!\bMr)(?<!\bMs)(?<!\bvs)(?<!\bq)[.!?](?=\s+[A-Z\d\-•*(\[\"'])"
                  r"|[。！？；;](?=.)|[.!?](?=\s*$)", re.M)
_BULLET = re.compile(r"^\s*(?:[-*•·]|\d{1,2}[.)、]|[（(]\d{1,2}[）)]|[一二三四五六七八九十]+、)\s*")


def _line_breaks(text: str) -> list[int]:
    """Offsets of newlines that end a sentence."""
    breaks = []
    lines = text.split("\n")
    pos = 0
    for i, line in enumerate(lines[:-1]):
        end = pos + len(line)
        nxt = lines[i + 1]
        stripped, nstripped = line.strip(), nxt.strip()
        cont = False
        if stripped and nstripped and not _BULLET.match(nxt) and not re.match(r"^#|^[A-Z][A-Z /&]{2,}:", nstripped):
            if nstripped[0].islower() and not stripped.endswith((".", ":", ";", "。", "：")):
                cont = True
            elif len(stripped) >= 55 and not stripped.endswith((".", ":", ";", "。", "：", "！", "？")) and not has_cjk(stripped[-1:]):
                cont = True
            elif nstripped[0].islower() and len(stripped) < 40 and not stripped.endswith((".", ":", "。", "：")):
                cont = True  # "Alex454\n is a ..." style continuation
        if not cont:
            breaks.append(end)
        pos = end + 1
    return breaks


def sentences(doc: Document) -> list[Span]:
    """The document's sentences (whitespace trimmed, empty ones dropped)."""
    text = doc.text
    cuts = set(_line_breaks(text))
    for m in _END.finditer(text):
        cuts.add(m.end())
    out: list[Span] = []
    start = 0
    for cut in sorted(cuts) + [len(text)]:
        s, e = start, cut
        while s < e and text[s].isspace():
            s += 1
        while e > s and text[e - 1].isspace():
            e -= 1
        if e > s:
            out.append(Span(doc, s, e, "sentence"))
        start = cut
    return out


def find_sentence(sents: list[Span], offset: int) -> Span | None:
    """The sentence holding `offset` (binary search)."""
    lo, hi = 0, len(sents) - 1
    while lo <= hi:
        mid = (lo + hi) // 2
        s = sents[mid]
        if offset < s.start:
            hi = mid - 1
        elif offset >= s.end:
            lo = mid + 1
        else:
            return s
    return None


def word_boundary_ok(text: str, start: int, end: int) -> bool:
    """An ASCII match must not sit inside a longer word; CJK matches need no boundary."""
    if start > 0 and text[start - 1].isascii() and (text[start - 1].isalnum() or text[start - 1] == "_") and text[start].isascii():
        return False
    if end < len(text) and text[end].isascii() and (text[end].isalnum() or text[end] == "_") and text[end - 1].isascii():
        return False
    return True
