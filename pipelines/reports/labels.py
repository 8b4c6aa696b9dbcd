"""Label words and numbers: 'Figure'/'Fig.'/'图'/'表'/'图表'/'Exhibit' -> a kind, and numbers in
their printed forms ('2­1' with a soft hyphen, '2.1', 'II', 'A-1', '三') -> one normal form.
"""

from __future__ import annotations

import re

from pipelines.text.numerals import int_to_roman, roman_to_int

# English label words (case-insensitive) -> kind
EN_LABELS: dict[str, str] = {
    "figure": "figure", "figures": "figure", "fig": "figure", "fig.": "figure", "figs": "figure", "figs.": "figure",
    "table": "table", "tables": "table", "tab.": "table", "tabs.": "table",
    "exhibit": "exhibit", "exhibits": "exhibit",
    "chart": "chart", "charts": "chart",
}
ZH_LABELS: dict[str, str] = {"图表": "exhibit", "附图": "figure", "附表": "table", "续表": "table", "图": "figure", "表": "table"}
FLOAT_KINDS = ("figure", "table", "exhibit", "chart")
# kinds a Chinese or English mention may fall back to when the exact kind has no such number
KIN = {"figure": ("exhibit", "chart"), "table": ("exhibit",), "exhibit": ("figure", "table", "chart"), "chart": ("figure", "exhibit")}

DASHES = "-\u00ad\u2010\u2011\u2012\u2013\u2014\u2212\uff0d"
_DASH_RE = re.compile(f"[{DASHES}]")
EN_LABEL_RE = r"(?:Figures?|Figs?\.?|FIGURES?|FIGS?\.?|Tables?|TABLES?|Tabs?\.|Exhibits?|EXHIBITS?|Charts?|CHARTS?)"
# in running text a label may be lower-case ("see table 2", "fig. 3")
EN_MENTION_LABEL_RE = r"(?:[Ff]igures?|[Ff]igs?\.?|FIGURES?|FIGS?\.?|[Tt]ables?|TABLES?|[Tt]abs?\.|[Ee]xhibits?|EXHIBITS?|[Cc]harts?|CHARTS?)"
ZH_LABEL_RE = r"(?:图表|附图|附表|续表|图|表)"
# one number: 3 | 2-1 | 2.1 | A-1 | A.1 | II ; with a soft hyphen or any dash inside
NUM_RE = rf"(?:\d{{1,3}}(?:\s?[{DASHES}.．]\s?\d{{1,3}}){{0,2}}|[A-Z][{DASHES}.]?\d{{1,3}}|[IVXL]{{1,6}}\b)"
NUM_RE_ZH = rf"(?:\d{{1,3}}(?:\s?[{DASHES}.．]\s?\d{{1,3}}){{0,2}}|[A-Z]\s?[{DASHES}.]\s?\d{{1,3}})"
# a table of contents' leader between a title and its page: "....", "……", "····"
DOT_LEADER = re.compile(r"(?:\.\s?){4,}|…{2,}|·{4,}")
PANEL_RE = r"(?:\s?\(([a-h])\)|\s?([a-h])\)|([a-h])(?![\w]))"


def label_kind(word: str) -> str | None:
    """Kind of a label word ('Fig.' -> 'figure', '图表' -> 'exhibit'; 'Fig-\\nure', broken over two
    lines with a hyphen, -> 'figure')."""
    w = re.sub(rf"[{DASHES}]\s*\n\s*", "", word.strip())
    if w in ZH_LABELS:
        return ZH_LABELS[w]
    return EN_LABELS.get(w.lower())


def printed_number(label: str) -> str:
    """The number of a printed label as the document prints it, for display: 'Figure 2.1' -> '2.1',
    '图 2\u00ad1' -> '2-1' (any dash shown as '-'), '(A.3)' / '（A.3）' -> 'A.3', '表 3．2' -> '3.2'.
    Matching uses `norm_number`."""
    s = re.sub(rf"^\s*(?:{ZH_LABEL_RE}|{EN_LABEL_RE})", "", label.strip())
    s = re.sub(r"\s+", "", s).strip("()（）")
    return _DASH_RE.sub("-", s).replace("．", ".").strip("-")


def norm_number(raw: str) -> str:
    """'2­1' / '2 - 1' / '2.1' / '2．1' -> '2-1'; 'A.1' -> 'A-1'; Roman numerals kept upper-case."""
    s = re.sub(r"\s+", "", raw)
    s = _DASH_RE.sub("-", s).replace("．", "-").replace(".", "-")
    return s.strip("-").upper() if re.fullmatch(r"[ivxlIVXL]+", s) else s.strip("-")


def expand_range(a: str, b: str) -> list[str] | None:
    """Numbers from a to b inclusive: ('2', '4') -> 2, 3, 4; ('2-1', '2-3') -> 2-1, 2-2, 2-3;
    ('II', 'IV') -> II, III, IV (Roman numerals read leniently: IIII is 4). None when the two do not
    form a short increasing range."""
    if a.isdigit() and b.isdigit():
        i, j = int(a), int(b)
        return [str(k) for k in range(i, j + 1)] if 0 < j - i <= 30 else None
    pa, pb = a.rsplit("-", 1), b.rsplit("-", 1)
    if len(pa) == 2 and len(pb) == 2 and pa[0] == pb[0] and pa[1].isdigit() and pb[1].isdigit():
        i, j = int(pa[1]), int(pb[1])
        return [f"{pa[0]}-{k}" for k in range(i, j + 1)] if 0 < j - i <= 30 else None
    ra, rb = roman_to_int(a, strict=False), roman_to_int(b, strict=False)
    if ra and rb and 0 < rb - ra <= 30:
        return [int_to_roman(k, upper=True) for k in range(ra, rb + 1)]
    return None
