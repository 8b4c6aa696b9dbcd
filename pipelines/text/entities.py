"""Key entities of a text (dates, money, percentages, numbers, Chinese article references, names,
quoted terms) and how many of them survive when only parts of the text are kept.

Entities (`extract_entities`) are found by a simple, documented, dependency-free method, run on the
text after NFKC normalisation (full-width digits and letters become ASCII):

- dates: ISO `2021-03-04`, `3/4/2021`, `March 3, 2021` / `3 March 2021` / `March 2021`, and Chinese
  or Japanese `2021年3月4日` (year, month, day parts optional after the first);
- money: a currency sign or code before a number (`$5,000`, `USD 12.5 million`, `¥300`), or a
  currency word after it (`300 dollars`, `500万元`);
- percentages: `12.5%`, `12 percent`, `百分之十五`;
- numbers: any other digit run of at least two characters (`4817`, `3.5`, `1,200`; lone digits are
  mostly list markers and are left out), and Chinese-numeral quantities with their unit (`二十年`,
  `六个月`, `七十五周岁`, `五万元`, `三倍`);
- article references of Chinese legal text: `第二十三条`, `第5款`, `第三章`;
- names (Latin script): two or more Title-case words in a row, allowing the connectors
  of/the/and/for/de/du/la/le/van/von/der/da/di between them (`Bank of England`, `Acme Widget
  Corporation`), with a leading sentence word such as The/In/This stripped;
- quoted terms: 1-20 characters inside 「」『』《》“” or "" that contain a CJK character, or 1-5
  Title-case words inside quotes (defined terms of contracts: “Customer Data”).

An entity is the normalised matched string (whitespace collapsed); retention is computed over the
distinct entities of the document. No NLP model is involved, so names in lower case, single-word
names and CJK names outside quotes are not counted.
"""

from __future__ import annotations

import bisect
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

from pipelines.text.script import CJK

# an English month name or its abbreviation (Sept too), as a regex group without the trailing dot
MONTH = (
    r"(?:Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|June?|July?|Aug(?:ust)?|"
    r"Sep(?:t(?:ember)?)?|Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?)"
)
_NUM = r"\d+(?:[.,]\d+)*"
_ENTITY_PATTERNS: list[tuple[str, re.Pattern[str]]] = [
    ("date", re.compile(r"\b\d{4}-\d{1,2}-\d{1,2}\b")),
    ("date", re.compile(r"\b\d{1,2}/\d{1,2}/\d{2,4}\b")),
    ("date", re.compile(rf"\b(?:\d{{1,2}}\s+)?{MONTH}\.?(?:\s+\d{{1,2}}(?:st|nd|rd|th)?)?,?\s+\d{{4}}\b")),
    ("date", re.compile(r"\d{2,4}\s*年(?:\s*\d{1,2}\s*月)?(?:\s*\d{1,2}\s*[日号])?|\d{1,2}\s*月\s*\d{1,2}\s*[日号]")),
    ("money", re.compile(
        rf"(?:[$€£¥]|\b(?:US\$|USD|EUR|GBP|RMB|CNY|JPY)\s?)\s?{_NUM}"
        r"(?:\s?(?:million|billion|thousand|bn|m|k)\b)?"
    )),
    ("money", re.compile(rf"\b{_NUM}\s?(?:dollars|euros|pounds|yuan|USD|EUR|GBP|RMB)\b|{_NUM}\s?(?:万元|亿元|元|美元|欧元)")),
    ("percent", re.compile(rf"\b{_NUM}\s?(?:%|percent\b|per cent\b)|百分之[零〇一二三四五六七八九十百千点]+")),
    ("number", re.compile(r"\d+(?:[.,]\d+)*")),
    ("article", re.compile(r"第[零〇一二三四五六七八九十百千万\d]+[条款项章节编]")),
    ("number", re.compile(r"[零〇一二三四五六七八九十百千万亿两]+(?:个月|周岁|年|日|天|倍|万元|亿元|元)")),
    ("quoted", re.compile(rf"[「『《“\"]([^」』》”\"\n]{{1,20}}?[{CJK}][^」』》”\"\n]{{0,20}}?)[」』》”\"]")),
    ("quoted", re.compile(r"[“\"]((?:[A-Z][A-Za-z0-9'’&-]*\s?){1,5})[”\"]")),
    ("name", re.compile(
        r"\b[A-Z][a-z][A-Za-z'’&-]*(?:\s+(?:(?:of|the|and|for|de|du|la|le|van|von|der|da|di)\s+)*"
        r"[A-Z][a-z][A-Za-z'’&-]*)+"
    )),
]
_LEADING = {
    "The", "A", "An", "In", "On", "At", "This", "That", "These", "Those", "If", "When", "Then", "For",
    "And", "But", "Or", "Of", "To", "By", "From", "With", "As", "Under", "Upon", "Each", "Any", "All",
    "Our", "Your", "Its", "His", "Her", "Their", "We", "You", "It", "He", "She", "They", "Dear",
}


@dataclass
class Entity:
    """One key entity: its normalised text (whitespace collapsed), kind and character span in the
    text it was extracted from."""

    text: str
    kind: str  # date, money, percent, number, article, quoted, name
    start: int
    end: int


def _normalise(text: str) -> str:
    return " ".join(text.split())


def extract_entities(text: str) -> list[Entity]:
    """Key entities of `text` in order of appearance (see the module docstring for the rules).

    Spans refer to `text` itself: NFKC is applied per character so that offsets stay valid
    (characters that NFKC expands to several, such as ligatures, keep their first character)."""
    norm = "".join((unicodedata.normalize("NFKC", c) or c)[:1] for c in text)
    found: list[tuple[int, int, str, str]] = []
    for kind, pat in _ENTITY_PATTERNS:
        for m in pat.finditer(norm):
            if kind == "quoted":
                s, e = m.span(1)
            else:
                s, e = m.span()
            value = norm[s:e]
            if kind == "number" and len(value) < 2:
                continue
            if kind == "name":
                words = value.split()
                while words and words[0] in _LEADING:
                    s = norm.index(words[1], s + len(words[0])) if len(words) > 1 else e
                    words = words[1:]
                if len(words) < 2:
                    continue
                value = " ".join(words)
            found.append((s, e, kind, value))
    # leftmost match wins; at the same start the longer one; earlier patterns win exact ties
    found.sort(key=lambda f: (f[0], -(f[1] - f[0])))
    out: list[Entity] = []
    end = -1
    for s, e, kind, value in found:
        if s < end:
            continue
        out.append(Entity(_normalise(value), kind, s, e))
        end = e
    return out


def entity_retention(text: str, seen_spans: Sequence[tuple[int, int]]) -> tuple[int, int, list[str]]:
    """(entities_total, entities_kept, lost) for the distinct entities of `text`, where an entity is
    kept when at least one of its occurrences lies wholly inside one of `seen_spans` (char spans)."""
    ents = extract_entities(text)
    spans = sorted(seen_spans)
    starts = [s for s, _ in spans]
    kept: set[str] = set()
    order: dict[str, None] = {}
    for ent in ents:
        order.setdefault(ent.text, None)
        i = bisect.bisect_right(starts, ent.start) - 1
        if i >= 0 and spans[i][1] >= ent.end:
            kept.add(ent.text)
    lost = [t for t in order if t not in kept]
    return len(order), len(kept), lost


def entity_retention_texts(text: str, seen: Sequence[str]) -> tuple[int, int, list[str]]:
    """Like `entity_retention` when only the seen pieces' texts are known (token-id requests):
    an entity is kept when it is also extracted from one of the pieces."""
    total = list(dict.fromkeys(e.text for e in extract_entities(text)))
    have = {e.text for piece in seen for e in extract_entities(piece)}
    lost = [t for t in total if t not in have]
    return len(total), len(total) - len(lost), lost
