"""The normalised view of a document's text that the patent parser reads.

Every regular expression of the parser runs on `norm`, a string of exactly the same length as
`doc.text`, so an offset found in `norm` is an offset into the document: full-width digits and
punctuation are mapped one-to-one onto ASCII (`１．` -> `1.`), and lines recognised as page
furniture inside the text (page numbers, running headers such as "US 7,156,074 B2" or
"权利要求书 2/3页", bare line numbers) are blanked with spaces. Spans are then cut from the
original text with `Document.span`, so `doc.text[start:end] == span.text` holds by construction.
"""

from __future__ import annotations

import re
from collections import Counter

_FULLWIDTH = {chr(0xFF10 + i): str(i) for i in range(10)}
_FULLWIDTH.update(
    {
        "．": ".", "，": ",", "（": "(", "）": ")", "；": ";", "：": ":", "～": "~", "－": "-",
        "［": "[", "］": "]", "【": "[", "】": "]", "\u00a0": " ", "\u3000": " ", "\t": " ",
        "\u2010": "-", "\u2011": "-", "\u2012": "-", "\u2013": "-", "\u2014": "-", "\u2212": "-",
        "\u201c": '"', "\u201d": '"', "\u2018": "'", "\u2019": "'", "\r": "\n", "\f": "\n",
        "\u2028": "\n", "\u2029": "\n", "\x0b": "\n", "\x85": "\n",
    }
)
_TABLE = str.maketrans(_FULLWIDTH)

# A line that is only a page number or a line number: "5", "- 3 -", "Page 3 of 10", "3/10", "第3页".
_PAGE_NUMBER_LINE = re.compile(
    r"(?:(?:page|p\.)\s*\d{1,4}(?:\s*(?:of|/)\s*\d{1,4})?|[-\s]*\d{1,4}[-\s]*|\d{1,4}\s*/\s*\d{1,4}\s*(?:页)?"
    r"|第\s*\d{1,4}\s*页(?:\s*[,/]?\s*共\s*\d{1,4}\s*页)?|共\s*\d{1,4}\s*页\s*第\s*\d{1,4}\s*页)",
    re.IGNORECASE,
)
# A running header or footer: publication numbers, dates, "Sheet 1 of 3", the claims title with a
# page count ("权利要求书 1/2 页", "CLAIMS 2/5").
_PUB_NUMBER = r"(?:US|EP|WO|CN|JP|KR|DE|GB|FR|CA|AU)\s*(?:\d[\d,/ .]*\d|\d)\s*(?:[A-Z]\d?)?"
_HEADER_LINE = re.compile(
    rf"(?:(?:{_PUB_NUMBER}|Sheet\s*\d+\s*of\s*\d+|(?:Patent\s+)?Application\s+Publication|U\.S\.\s*Patent"
    r"|[A-Z][a-z]{2}\.?\s+\d{1,2},\s*\d{4}|\d{4}[-./年]\d{1,2}[-./月]\d{1,2}日?)\s*)+",
)
_TITLE_WITH_PAGE = re.compile(
    r"(?:权\s*利\s*要\s*求\s*书|说\s*明\s*书|claims?)\s*(?:\d{1,3}\s*/\s*\d{1,3}\s*页?|第\s*\d{1,3}\s*页.*)",
    re.IGNORECASE,
)
_DIGITS = re.compile(r"\d+")


def normalise(text: str) -> str:
    """`text` with full-width forms mapped to ASCII, same length (offsets are preserved)."""
    return text.translate(_TABLE)


def is_furniture_line(line: str) -> bool:
    """True for a line that is page furniture on its own (without looking at repetition)."""
    s = line.strip()
    if not s or len(s) > 90:
        return False
    return bool(
        _PAGE_NUMBER_LINE.fullmatch(s) or _HEADER_LINE.fullmatch(s) or _TITLE_WITH_PAGE.fullmatch(s)
    )


def line_ranges(norm: str, start: int = 0, end: int | None = None) -> list[tuple[int, int]]:
    """(start, end) of every line of norm[start:end], newline excluded."""
    end = len(norm) if end is None else end
    out = []
    pos = start
    while pos <= end:
        nl = norm.find("\n", pos, end)
        if nl < 0:
            out.append((pos, end))
            break
        out.append((pos, nl))
        pos = nl + 1
    return out


def mask_furniture(norm: str, start: int, end: int, protect: re.Pattern[str] | None = None) -> tuple[str, list[tuple[int, int]]]:
    """Blank furniture lines of norm[start:end]; return the new norm and the blanked ranges.

    Furniture is a line that looks like a page number or running header by itself, or a short
    line with a digit that repeats (digits ignored) at least twice and does not look like a claim
    start (`protect`) or end with the punctuation of claim text.
    """
    lines = line_ranges(norm, start, end)
    keys = Counter()
    stripped: list[str] = []
    for a, b in lines:
        s = norm[a:b].strip()
        stripped.append(s)
        if 0 < len(s) <= 70 and any(c.isdigit() for c in s):
            keys[_DIGITS.sub("#", s)] += 1
    blank: list[tuple[int, int]] = []
    for (a, b), s in zip(lines, stripped, strict=True):
        if not s:
            continue
        hit = is_furniture_line(s)
        if not hit and 0 < len(s) <= 70 and keys.get(_DIGITS.sub("#", s), 0) >= 2:
            looks_like_text = s[-1] in ".;:,。；：，" or (protect is not None and protect.match(s))
            hit = not looks_like_text and not re.search(r"claim|权利要求", s, re.IGNORECASE)
        if hit:
            blank.append((a, b))
    if not blank:
        return norm, []
    parts = []
    prev = 0
    for a, b in blank:
        parts.append(norm[prev:a])
        parts.append(" " * (b - a))
        prev = b
    parts.append(norm[prev:])
    return "".join(parts), blank


def trim(norm: str, start: int, end: int, chars: str = "") -> tuple[int, int]:
    """Shrink [start, end) past whitespace (and `chars`) on both sides."""
    while start < end and (norm[start].isspace() or norm[start] in chars):
        start += 1
    while end > start and (norm[end - 1].isspace() or norm[end - 1] in chars):
        end -= 1
    return start, end
