"""Structure anchors: a contract's text cut into clauses, each with a stable anchor and its span.

Recognised numbering (English and Chinese, Arabic, full-width, Chinese and Roman numerals):
第X编/章/节/条(之一)/款/项, （一）, 一、, 1、, ①; Article I, Section 2.03, 1., 1.1, 1.1.1, (a), (i),
(A), A., I.; Markdown headings; Schedules, Exhibits, Annexes, Appendices (附件); recitals (WHEREAS,
鉴于); signature blocks (IN WITNESS WHEREOF, By:/Name:/Title:, 盖章/签字); unnumbered headings;
definitions ("X" means …, “X”是指 …); cross-references with their targets (Section 4.2,
依照本合同第十二条). Unmarked Chinese 款 (the Nth paragraph of a 条) become clauses anchored
第X条第N款. A table of contents (a run of numbered lines whose numbers and titles come back later)
is not mistaken for the clauses themselves.

The clauses partition the text: every non-space character belongs to exactly one clause, so the
gaps between clauses are whitespace only (the round trip of the redline depends on it).
Hierarchy comes from a stack of numbering styles (the way a reader nests (a) inside 1.1 inside 1).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from pipelines.documents import Document, HasSpan, Span
from pipelines.text.numerals import CN_NUMERAL_CHARS, int_to_chinese, parse_number, roman_to_int
from pipelines.text.script import HAN, detect_language, to_halfwidth

CN = f"[{CN_NUMERAL_CHARS}0-9]"
_ZH_RANK = {"部分": 0, "编": 0, "章": 1, "节": 2, "条": 3, "款": 4, "项": 5, "目": 6}

# -- marker patterns (matched on the half-width form of a line; offsets are unchanged by it) --------
RE_MD = re.compile(r"#{1,6}\s+")
RE_ZH = re.compile(rf"第\s*({CN}+)\s*(部分|编|章|节|条|條|款|项|目)(?:\s*之\s*({CN}+))?")
RE_ZH_PAREN = re.compile(rf"\(\s*([{CN_NUMERAL_CHARS}]+)\s*\)")
RE_ZH_DUN = re.compile(rf"([{CN_NUMERAL_CHARS}]+)\s*[、]")
RE_NUM_DUN = re.compile(r"(\d{1,3})\s*、")
RE_CIRCLED = re.compile(r"([\u2460-\u2473])")
RE_ARTICLE = re.compile(r"(ARTICLE|Article)\s+(\d{1,3}|[IVXLC]{1,6}|[A-Z])\b\.?")
RE_SECTION = re.compile(r"(SECTION|Section|CLAUSE|Clause|§)\s*(\d{1,3}(?:\.\d{1,3})*)\b\.?")
RE_SCHEDULE = re.compile(
    r"(SCHEDULE|Schedule|EXHIBIT|Exhibit|ANNEX|Annex|APPENDIX|Appendix|ATTACHMENT|Attachment|附件|附表|附录)"
    rf"\s*((?:\d{{1,3}}|[A-Z]{{1,2}}|[IVX]{{1,5}}|[{CN_NUMERAL_CHARS}]+)\b)?"
)
RE_DOTTED = re.compile(rf"(\d{{1,3}}(?:\.\d{{1,3}})+)\.?(?=\s|$|[{HAN}])")
RE_NUM = re.compile(rf"(\d{{1,3}})([.)])(?=\s|$|[{HAN}])")
RE_ALPHA_UP = re.compile(r"([A-Z]|[IVX]{2,5})\.(?=\s)")
RE_ALPHA_LOW = re.compile(r"([a-z]|[ivx]{2,5})[.)](?=\s)")
RE_PAREN = re.compile(rf"\((\d{{1,3}}|[a-z]{{1,5}}|[A-Z]{{1,5}})\)(?=\s|$|[{HAN}])")
RE_RECITAL = re.compile(r"(WHEREAS|Whereas|RECITALS?|Recitals?|鉴于)\b|鉴于")
RE_NOW_THEREFORE = re.compile(r"(NOW,?\s+THEREFORE|Now,?\s+therefore)")
RE_SIGNATURE = re.compile(
    r"(IN WITNESS WHEREOF|In witness whereof|IN WITNESS THEREOF)|"
    r"(甲方|乙方|丙方)?\s*[(（]?\s*(签字|签章|盖章|签署|签名)|^(By|Signature|Signed)\s*:"
)
RE_SIG_LINE = re.compile(r"(By|Name|Title|Date|Signature|Signed|签字|盖章|日期|法定代表人|授权代表)\s*[:：]|_{4,}")

# -- definitions and cross-references --------------------------------------------------------------
Q_OPEN = "\"“'‘「『"
Q_CLOSE = "\"”'’」』"
RE_DEF_EN = re.compile(
    rf"[{Q_OPEN}]([A-Z][^{Q_CLOSE}\n]{{0,60}}?)[{Q_CLOSE}]\s*(?:,\s*[{Q_OPEN}][^{Q_CLOSE}\n]{{1,40}}[{Q_CLOSE}]\s*,?\s*)*"
    r"(?:\)\s*)?(?:\bor\s+[" + Q_OPEN + r"][^" + Q_CLOSE + r"\n]{1,40}[" + Q_CLOSE + r"]\s*)?"
    r"(means|shall mean|mean|has the meaning|have the meaning|will have the meaning|refers?|represents|includes)\b"
)
RE_DEF_EN_PAREN = re.compile(
    rf"\((?:the |each a |each an |each, a |a |an |collectively,? (?:the )?|together,? (?:the )?|hereinafter(?: referred to as)? (?:the )?)?"
    rf"[{Q_OPEN}]([A-Z][^{Q_CLOSE}\n]{{0,50}}?)[{Q_CLOSE}]"
)
RE_DEF_ZH = re.compile(r"[“\"「]([^”\"」\n]{1,30})[”\"」](?:[，,、]?\s*[“\"「][^”\"」\n]{1,30}[”\"」])*\s*[，,]?\s*(?:是指|指|系指|意指)")
RE_DEF_ZH_BARE = re.compile(r"(?:本合同|本协议|本条|本解释|本法|本规定)(?:中)?所称的?([^，,。；“”\"\s]{1,20}?)[，,]?\s*(?:是指|系指|指)")
RE_XREF_EN = re.compile(
    r"\b(Sections?|Clauses?|Articles?|Paragraphs?|Subsections?|Schedules?|Exhibits?|Annex(?:es)?|Appendix|Appendices)\s+"
    r"((?:\d{1,3}(?:\.\d{1,3})*|[A-Z](?![A-Za-z])|[IVXL]{1,6}(?![A-Za-z]))(?:\.\d{1,3})*(?:\([A-Za-z0-9]{1,4}\))*"
    r"(?:\s*(?:,|and|or|through|to|-|–)\s*(?:\d{1,3}(?:\.\d{1,3})*|[A-Z](?![A-Za-z])|[IVXL]{1,6}(?![A-Za-z]))(?:\.\d{1,3})*(?:\([A-Za-z0-9]{1,4}\))*)*)"
)
RE_XREF_EN_ONE = re.compile(r"(?:\d{1,3}(?:\.\d{1,3})*|[A-Z](?![A-Za-z])|[IVXL]{1,6}(?![A-Za-z]))(?:\.\d{1,3})*(?:\([A-Za-z0-9]{1,4}\))*")
RE_XREF_ZH = re.compile(rf"第({CN}+)条(?:之({CN}+))?(?:第({CN}+)款)?(?:第({CN}+)项)?")
RE_EXTERNAL_EN = re.compile(r"^\s*(?:\([^)]*\)\s*)?(of|in|under)\s+(the\s+)?(?!this\b|these\b)([A-Z][\w-]*)")

TERMINAL = tuple(".;:!?。；：！？")


@dataclass(frozen=True, slots=True, eq=False, kw_only=True)
class CrossRef(Span):
    """A reference inside a clause to another clause: a `Span` of the document's text, and what it
    points to."""

    target: str  # normalised label, e.g. "4.2", "B.4", "第十二条"
    anchor: str | None = None  # the clause it resolves to in the same document, if any
    external: bool = False


@dataclass
class Clause(HasSpan):
    """One clause: anchor, number as written, heading, its `Span` of the document's text and what it
    contains (`label_start`/`label_end`: offsets of the number label in the same text)."""

    index: int
    anchor: str
    number: str | None
    kind: str  # numbered | heading | preamble | recital | definition | schedule | signature | paragraph
    level: int
    span: Span
    parent: str | None = None
    heading: str | None = None
    label_start: int | None = None  # the number label as written, e.g. "1.2" or "第十二条"
    label_end: int | None = None
    style: str = ""
    defines: list[str] = field(default_factory=list)
    xrefs: list[CrossRef] = field(default_factory=list)
    path: tuple = ()  # numeric path for cross-reference lookup, e.g. ("b", 4)

    def extend_to(self, end: int) -> None:
        """The clause runs on to `end` (a continuation line)."""
        self.span = Span(self.span.doc, self.span.start, end)

    def body(self, text: str) -> str:
        """The clause text without its own number label (what alignment compares)."""
        if self.label_start is None:
            return text[self.start:self.end]
        return text[self.start:self.label_start] + text[self.label_end:self.end]


@dataclass
class Structure:
    """All clauses of one document, in text order, and the language that was detected."""

    clauses: list[Clause]
    language: str  # "en" | "zh"
    terms: dict[str, str]  # defined term -> anchor of the clause defining it

    def by_anchor(self) -> dict[str, Clause]:
        return {c.anchor: c for c in self.clauses}


@dataclass
class _Line:
    """A line while parsing: offsets into the document's text, with a half-width copy of the line
    (`to_halfwidth`, same length) that the marker and heading patterns read."""

    start: int  # offset of the first non-space character
    end: int  # offset after the last non-space character
    text: str  # half-width copy of text[start:end]
    blank_before: bool


@dataclass
class _Marker:
    style: str
    label: str  # as written (stripped), e.g. "1.1", "(a)", "第十二条之一"
    key: str  # canonical part for the anchor, e.g. "1.1", "(a)", "第十二条之一"
    value: int | None  # ordinal within its style, for sequence checks
    length: int  # characters of the line the marker (with following spaces) takes
    rank: tuple[str, int] | None = None  # (family, depth) for styles that nest by kind


def contract_language(text: str) -> str:
    """ "zh" when Han characters are more than 30% of the letters of `text`, else "en"."""
    return detect_language(text, 0.3, "letters")


def _lines(text: str) -> list[_Line]:
    out: list[_Line] = []
    pos = 0
    blank = True
    for raw in re.split(r"(?<=\n)", text):
        stripped = raw.strip(" \t\r\n\f\v\u3000\u00a0")
        if not stripped:
            blank = True
        else:
            s = pos + raw.index(stripped[0])
            out.append(_Line(s, s + len(stripped), to_halfwidth(stripped), blank))
            blank = "\f" in raw
        pos += len(raw)
    return out


def _alpha_value(s: str) -> int | None:
    if len(s) == 1 and s.isalpha():
        return ord(s.lower()) - ord("a") + 1
    if len(set(s)) == 1 and s.isalpha():  # (aa) after (z)
        return 26 * (len(s) - 1) + ord(s[0].lower()) - ord("a") + 1
    return None


def _match_marker(line: str, lang: str) -> _Marker | None:
    """The numbering marker at the start of a (half-width) line, if there is one."""
    md = RE_MD.match(line)
    offset = md.end() if md else 0
    s = line[offset:]

    def mk(style, label, key, value, m_end, rank=None):
        rest = s[m_end:]
        length = offset + m_end + (len(rest) - len(rest.lstrip(" \t:：.．、")))
        return _Marker(style, label, key, value, length, rank)

    m = RE_ZH.match(s)
    if m:
        unit = "条" if m.group(2) == "條" else m.group(2)
        n = parse_number(m.group(1))
        if n is not None:
            key = f"第{int_to_chinese(n)}{unit}"
            if m.group(3):
                k = parse_number(m.group(3))
                key += f"之{int_to_chinese(k or 0)}"
            return mk("zh-" + unit, m.group(0), key, n, m.end(), ("zh", _ZH_RANK[unit]))
    m = RE_SCHEDULE.match(s)
    rest = s[m.end():].strip() if m else ""
    if m and len(line) <= 100 and (not rest or rest[0] in "-–—:：.(（" or _heading_like(rest, lang)
                                   or (not rest.isascii() and len(rest) <= 30 and not re.search(r"[。；，,]", rest))):
        word = m.group(1)
        word = word[0].upper() + word[1:].lower() if word.isascii() else word
        lab = m.group(2) or ""
        key = f"{word} {lab}".strip() if word.isascii() else f"{word}{lab}"
        return mk("schedule", m.group(0).strip(), key, parse_number(lab) if lab else None,
                  m.end(), ("sched", 0))
    m = RE_ARTICLE.match(s)
    if m:
        v = parse_number(m.group(2)) if not m.group(2).isalpha() or len(m.group(2)) > 1 or m.group(2) in "IVX" else None
        v = v if v is not None else _alpha_value(m.group(2))
        return mk("article", m.group(0).rstrip("."), f"Article {m.group(2)}", v, m.end(), ("en", 0))
    m = RE_SECTION.match(s)
    if m:
        num = m.group(2)
        return mk("section", m.group(0).rstrip("."), num, int(num.split(".")[-1]), m.end(), ("en", 1))
    m = RE_ZH_PAREN.match(s)
    if m and parse_number(m.group(1)) is not None:
        return mk("zh-paren", m.group(0), f"({m.group(1)})", parse_number(m.group(1)), m.end())
    m = RE_ZH_DUN.match(s)
    if m and parse_number(m.group(1)) is not None:
        return mk("zh-dun", m.group(0), f"{m.group(1)}、", parse_number(m.group(1)), m.end())
    m = RE_NUM_DUN.match(s)
    if m:
        return mk("num-dun", m.group(0), f"{m.group(1)}、", int(m.group(1)), m.end())
    m = RE_CIRCLED.match(s)
    if m:
        v = ord(m.group(1)) - 0x2460 + 1
        return mk("circled", m.group(1), f"({v})", v, m.end())
    m = RE_DOTTED.match(s)
    if m:
        num = m.group(1)
        depth = num.count(".") + 1
        return mk(f"dot{depth}", num, num, int(num.split(".")[-1]), m.end(), ("dot", depth))
    m = RE_NUM.match(s)
    if m:
        if m.group(2) == ")":  # "1)" nests differently from "1."
            return mk("num-paren", m.group(0), m.group(1), int(m.group(1)), m.end())
        return mk("dot1", m.group(0), m.group(1), int(m.group(1)), m.end(), ("dot", 1))
    m = RE_PAREN.match(s)
    if m:
        g = m.group(1)
        if g.isdigit():
            return mk("paren-num", m.group(0), f"({g})", int(g), m.end())
        case = "low" if g.islower() else "up"
        roman = roman_to_int(g)
        alpha = _alpha_value(g)
        if roman is None and alpha is None:
            return None
        return _ambiguous(f"paren-{case}", m.group(0), f"({g})", alpha, roman, mk, m.end())
    if lang == "en":
        for rx, case in ((RE_ALPHA_UP, "up"), (RE_ALPHA_LOW, "low")):
            m = rx.match(s)
            if m:
                g = m.group(1)
                roman = roman_to_int(g)
                alpha = _alpha_value(g)
                if roman is None and alpha is None:
                    return None
                return _ambiguous(f"dot-{case}", m.group(0), g, alpha, roman, mk, m.end())
    return None


def _ambiguous(style, label, key, alpha, roman, mk, end):
    """(i), (v), (x), I., V.: letter or Roman numeral? Decided later against the open styles."""
    if roman is None:
        return mk(style + "-alpha", label, key, alpha, end)
    if alpha is None:
        return mk(style + "-roman", label, key, roman, end)
    m = mk(style + "-alpha|roman", label, key, alpha, end)
    m.value = (alpha, roman)  # type: ignore[assignment]
    return m


def _heading_like(line: str, lang: str) -> bool:
    """A short title line: 'Summary', 'GENERAL TERMS', '总则' (not a sentence, no colon)."""
    t = line.strip().lstrip("#").strip()
    if not t or len(t) > (40 if lang == "zh" else 70) or t.endswith((",", "，", ";", "；", ":", "：", "、")):
        return False
    if lang == "zh":
        return not re.search(r"[。；：，,]", t) and len(t) <= 30
    words = t.split()
    if len(words) > 9 or ":" in t or t[-1] in ".;!?" and len(words) > 6:
        return False
    if not (t[0].isupper() or t[0].isdigit() or not t[0].isascii()):
        return False
    capitalised = sum(1 for w in words if w[0].isupper() or not w[0].isalpha() or w.lower() in
                      {"of", "and", "or", "the", "to", "for", "in", "on", "a", "an", "with", "by", "&", "at", "from", "under",
                       "as", "upon", "into", "per", "vs", "not", "no"})
    return capitalised == len(words)


def _heading_of(rest: str, lang: str, whole_line: bool) -> str | None:
    """The heading of a numbered clause from the text after its number."""
    rest = rest.strip()
    if not rest:
        return None
    if lang == "zh":
        m = re.match(r"[【\[]([^】\]]{1,30})[】\]]", rest)
        if m:
            return m.group(1)
        return rest if whole_line and len(rest) <= 30 and not re.search(r"[。；，,]", rest) else None
    if whole_line and _heading_like(rest.rstrip("."), "en"):
        return rest.rstrip(".").strip()
    m = re.match(r"([A-Z][^.:;]{0,80}?)[.:](\s|$)", rest)
    if m and _heading_like(m.group(1), "en") and len(m.group(1).split()) <= 8:
        return m.group(1).strip()
    return None


def _slug(s: str) -> str:
    s = re.sub(r"[^\w]+", "-", s.strip().lower(), flags=re.UNICODE).strip("-")
    return s[:40] or "x"


def find_toc_lines(lines: list[_Line], lang: str) -> set[int]:
    """Indexes of lines that form a table of contents: >= 3 numbered lines in a row with no blank
    line between them, most of whose (style, number, first words) appear again later as clauses."""
    markers = [_match_marker(ln.text, lang) for ln in lines]
    toc: set[int] = set()
    i = 0
    while i < len(lines):
        j = i
        while j < len(lines) and markers[j] and (j == i or not lines[j].blank_before):
            j += 1
        if j - i >= 3:
            later = {}
            for k in range(j, len(lines)):
                if markers[k]:
                    later.setdefault((markers[k].key, _first_words(lines[k].text[markers[k].length:])), k)
            hits = sum(1 for k in range(i, j) if (markers[k].key, _first_words(lines[k].text[markers[k].length:])) in later)
            if hits >= 0.6 * (j - i):
                toc.update(range(i, j))
        i = max(j, i + 1)
    return toc


def _first_words(s: str) -> str:
    return " ".join(re.findall(r"\w+", s.lower())[:2]) if s.isascii() else s[:4]


def parse_structure(doc: Document, language: str | None = None, page_starts: list[int] | None = None) -> Structure:
    """Cut the document's text into clauses with anchors, spans, headings, definitions and cross-references.

    `page_starts` (character offsets where pages begin, PDF input): the first line of a page starts a
    new paragraph when the last line of the previous page ended a sentence — ingest cannot see a
    paragraph gap across a page break, and a clause that runs on over the break stays one clause."""
    text = doc.text
    lang = language or contract_language(text)
    lines = _lines(text)
    if page_starts:
        firsts = set()
        starts = sorted(page_starts)
        k = 0
        for li, ln in enumerate(lines):
            while k < len(starts) and starts[k] <= ln.start:
                if li and lines[li - 1].end <= starts[k]:
                    firsts.add(li)
                k += 1
        for li in firsts:
            if lines[li - 1].text.endswith(TERMINAL):
                lines[li].blank_before = True
    toc = find_toc_lines(lines, lang)
    # paragraph mode: blank lines separate paragraphs, or (no blank lines) every line is one
    blank_mode = sum(1 for ln in lines if ln.blank_before) > 0.3 * max(len(lines), 1)
    # wrapped text (PDF, plain-text mail): many lines of nearly the longest length
    lengths = sorted(len(ln.text) for ln in lines)
    p90 = lengths[int(0.9 * (len(lengths) - 1))] if lengths else 0
    full_len = max(int(0.85 * p90), 1)
    wrapped = p90 >= (15 if lang == "zh" else 30) and sum(1 for n in lengths if n >= full_len) >= 0.3 * len(lengths)

    clauses: list[Clause] = []
    stack: list[tuple[_Marker, str]] = []  # open numbering styles with their anchors
    current: Clause | None = None
    kuan = 0  # paragraphs seen in the current Chinese 条
    tiao: Clause | None = None
    in_signature = False
    preamble_n = 0
    recital_n = 0
    seen_marker = False
    history: dict[str, object] = {}  # last value seen per numbering style

    def new(kind, anchor, number, level, ln, marker=None, heading=None, parent=None, style=""):
        nonlocal current
        c = Clause(len(clauses), anchor, number, kind, level, Span(doc, ln.start, ln.end), parent=parent, heading=heading,
                   style=style)
        if marker is not None:
            lab_off = ln.text.find(marker.label.strip()) if marker.label.strip() else -1
            if lab_off >= 0:
                c.label_start = ln.start + lab_off
                c.label_end = c.label_start + len(marker.label.strip())
                c.number = text[c.label_start:c.label_end]  # as written (full-width digits kept)
        clauses.append(c)
        current = c
        return c

    for li, ln in enumerate(lines):
        prev = lines[li - 1] if li else None
        prev_terminal = prev is not None and prev.text.endswith(TERMINAL)
        prev_full = prev is not None and wrapped and len(prev.text) >= full_len  # a line that wrapped
        if li == 0 or ln.blank_before:
            para_start = True
        elif blank_mode:
            para_start = prev_terminal and not prev_full  # a list item on its own line
        else:
            para_start = (prev_terminal or not wrapped) and not prev_full
        marker = None if li in toc else _match_marker(ln.text, lang)
        if marker is not None and not para_start and not (_expected(marker, stack) and (prev_terminal or not prev_full)):
            marker = None  # a wrapped line that happens to start with "4.2" or "(c)"
        if marker is not None and marker.style.startswith("dot-") and not _expected(marker, stack) and not ln.blank_before:
            marker = None
        if marker is not None and marker.style.startswith("dot-") and not ln.blank_before and blank_mode:
            marker = None  # "A." inside running text

        if marker is not None and marker.style == "schedule":
            in_signature = False
        if in_signature and marker is None:
            current.extend_to(ln.end)
            continue

        sig = RE_SIGNATURE.search(ln.text) if para_start else None
        if sig and (sig.group(1) or sig.group(4) or (lang == "zh" and len(ln.text) <= 40)) and (marker is None or sig.group(1)):
            in_signature = True
            n_sig = sum(1 for c in clauses if c.kind == "signature")
            new("signature", "signature" + (f"-{n_sig + 1}" if n_sig else ""), None, 0, ln)
            continue

        if marker is not None:
            seen_marker = True
            marker = _resolve_ambiguous(marker, stack, history)
            history[marker.style] = marker.value
            _place(marker, stack)
            anchor, parent, path = _compose_anchor(marker, stack, lang)
            stack.append((marker, anchor))
            rest = ln.text[marker.length:]
            heading = _heading_of(rest, lang, whole_line=True)
            kind = "schedule" if marker.style == "schedule" else "numbered"
            c = new(kind, anchor, marker.label.strip(), len(stack) - 1, ln, marker, heading, parent, marker.style)
            c.path = path
            if marker.style == "zh-条":
                tiao, kuan = c, 1
            elif marker.style.startswith("zh-") and _ZH_RANK.get(marker.style[3:], 9) < 3:
                tiao = None
            continue

        # an unmarked line
        if RE_RECITAL.match(ln.text) and para_start and not (current and current.kind == "recital" and not ln.blank_before):
            recital_n += 1
            new("recital", f"recital-{recital_n}", None, 0, ln)
            continue
        if RE_NOW_THEREFORE.match(ln.text) and para_start:
            stack.clear()  # the operative part starts: lettered recitals do not contain it
            new("recital", "operative-words", None, 0, ln)
            continue
        if para_start and ln.blank_before and (li + 1 >= len(lines) or lines[li + 1].blank_before) and \
                _heading_like(ln.text, lang) and not (lang == "zh" and tiao is not None) and \
                not (stack and stack[-1][0].style == "schedule" and current is not None and current.start == ln.start):
            # an unnumbered heading: its own clause; following paragraphs attach to it. An ALL-CAPS
            # heading (RECITALS, GENERAL TERMS) is a major division and closes the open numbering.
            tiao = None
            if ln.text.lstrip("#").strip().isupper():
                stack.clear()
            base = "h:" + _slug(ln.text.lstrip("#"))
            new("heading", base, None, len(stack), ln, heading=ln.text.lstrip("#").strip(),
                parent=stack[-1][1] if stack else None)
            continue
        if para_start and _starts_definition(ln.text, lang) and (current is None or current.kind in {"definition", "heading", "preamble"}
                                                                  or not seen_marker):
            term = _definition_terms(ln.text, lang)[0]
            parent = stack[-1][1] if stack else None
            new("definition", f"def:{term}", None, len(stack), ln, heading=term, parent=parent)
            continue
        if lang == "zh" and tiao is not None and para_start and current is not None and seen_marker:
            # an unmarked 款: the Nth paragraph of the current 条
            kuan += 1
            while stack and stack[-1][1] != tiao.anchor:
                stack.pop()
            new("paragraph", f"{tiao.anchor}第{int_to_chinese(kuan)}款", None, tiao.level + 1, ln, parent=tiao.anchor, style="zh-款")
            continue
        if current is None or (current.kind == "preamble" and para_start) or (not seen_marker and current.kind not in {"heading", "recital"}
                                                                             and para_start):
            preamble_n += 1
            new("preamble", f"preamble-{preamble_n}", None, 0, ln)
            continue
        current.extend_to(ln.end)  # continuation of the current clause

    _dedupe_anchors(clauses)
    terms: dict[str, str] = {}
    for c in clauses:
        seg = text[c.start:c.end]
        c.defines = _definition_terms(seg, lang)
        if c.kind == "definition" and c.heading and c.heading not in c.defines:
            c.defines.insert(0, c.heading)
        for t in c.defines:
            terms.setdefault(t, c.anchor)
    _find_xrefs(doc, clauses, lang)
    return Structure(clauses, lang, terms)


def _expected(marker: _Marker, stack: list[tuple[_Marker, str]]) -> bool:
    """Whether the marker continues an open sequence (next sibling) or starts a new one at 1."""
    v = marker.value
    values = v if isinstance(v, tuple) else (v,)
    for m, _ in stack:
        if m.style.split("-alpha")[0].split("-roman")[0] == marker.style.split("-alpha")[0].split("-roman")[0]:
            mv = m.value if not isinstance(m.value, tuple) else m.value
            prev = mv if isinstance(mv, tuple) else (mv,)
            if any(x is not None and p is not None and x == p + 1 for x in values for p in prev):
                return True
    if marker.style.startswith("dot") and marker.rank and marker.rank[1] > 1:
        parent = marker.key.rsplit(".", 1)[0]
        return any(a == parent or a.endswith(parent) for _, a in stack) and values[0] == 1
    return 1 in values


def _resolve_ambiguous(marker: _Marker, stack: list[tuple[_Marker, str]], history: dict | None = None) -> _Marker:
    if not marker.style.endswith("-alpha|roman"):
        return marker
    base = marker.style[: -len("-alpha|roman")]
    alpha, roman = marker.value  # type: ignore[misc]
    hist = history or {}
    in_stack = {m.style for m, _ in stack}
    if base + "-alpha" not in in_stack and hist.get(base + "-alpha") == alpha - 1 and \
            not (base + "-roman" in in_stack and hist.get(base + "-roman") == roman - 1):
        return _Marker(base + "-alpha", marker.label, marker.key, alpha, marker.length, marker.rank)
    for m, _ in reversed(stack):
        if m.style == base + "-alpha" and m.value is not None and alpha == m.value + 1:
            return _Marker(base + "-alpha", marker.label, marker.key, alpha, marker.length, marker.rank)
        if m.style == base + "-roman" and m.value is not None and roman == m.value + 1:
            return _Marker(base + "-roman", marker.label, marker.key, roman, marker.length, marker.rank)
    if roman == 1 or any(m.style == base + "-alpha" for m, _ in stack):
        return _Marker(base + "-roman", marker.label, marker.key, roman, marker.length, marker.rank)
    return _Marker(base + "-alpha", marker.label, marker.key, alpha, marker.length, marker.rank)


def _place(marker: _Marker, stack: list[tuple[_Marker, str]]) -> None:
    """Pop the stack so that the marker's parent is on top."""
    if marker.style == "schedule":
        stack.clear()
        return
    styles = [m.style for m, _ in stack]
    if marker.style in styles:
        while stack and stack[-1][0].style != marker.style:
            stack.pop()
        stack.pop()
        return
    if marker.rank is not None:
        fam, depth = marker.rank
        for i, (m, _) in enumerate(stack):
            if m.rank is not None and m.rank[0] == fam and m.rank[1] >= depth:
                del stack[i:]
                return
        if fam == "dot" and depth > 1:  # 1.1 belongs under 1 even when (a) items are open
            parent = marker.key.rsplit(".", 1)[0]
            for i, (m, _a) in enumerate(stack):
                if m.key == parent:
                    del stack[i + 1:]
                    return


def _compose_anchor(marker: _Marker, stack: list[tuple[_Marker, str]], lang: str) -> tuple[str, str | None, tuple]:
    parent_marker, parent = stack[-1] if stack else (None, None)
    key = marker.key
    if marker.style == "zh-条" or marker.style in {"zh-编", "zh-章"} or marker.style.startswith("dot") and "." in key \
            or marker.style in {"article", "section", "schedule"}:
        anchor = key
    elif marker.style in {"zh-节", "zh-款", "zh-项", "zh-目"}:
        anchor = (parent or "") + key
    elif marker.style.startswith(("paren", "zh-paren", "circled")):
        anchor = (parent or "") + key
    elif marker.style == "num-paren":
        sep = "." if parent and parent[-1].isalnum() and parent[-1].isascii() else ""
        anchor = (parent or "") + sep + key + ")"
    elif parent and not (parent_marker is not None and parent_marker.style == "schedule"):
        anchor = f"{parent}.{key.rstrip('、')}"
    else:
        anchor = key.rstrip("、")
    # inside a schedule / exhibit / annex every anchor is scoped by it: "Exhibit A/1.1"
    if stack and stack[0][0].style == "schedule" and marker.style != "schedule" and not anchor.startswith(stack[0][1] + "/"):
        anchor = f"{stack[0][1]}/{anchor}"
    path = _path_of(anchor)
    return anchor, parent, path


def _path_of(label: str) -> tuple:
    """("b", 4) for "B.4", "B(4)" and "Section B(4)"; (12,) for 第十二条; used to resolve references."""
    if "第" in label:
        parts = []
        for m in re.finditer(rf"第({CN}+)(?:[条款项章节])(?:之({CN}+))?", label):
            parts.append(parse_number(m.group(1)))
            if m.group(2):
                parts.append(("之", parse_number(m.group(2))))
        return tuple(parts)
    label = re.sub(r"^(Article|Section|Clause)\s+", "", label)
    out: list = []
    for tok in re.findall(r"[A-Za-z]+|\d+", label):
        out.append(int(tok) if tok.isdigit() else tok.lower())
    return tuple(out)


def _dedupe_anchors(clauses: list[Clause]) -> None:
    seen: dict[str, int] = {}
    for c in clauses:
        n = seen.get(c.anchor, 0) + 1
        seen[c.anchor] = n
        if n > 1:
            c.anchor = f"{c.anchor}~{n}"


def _starts_definition(line: str, lang: str) -> bool:
    head = line[:120]
    if lang == "zh":
        return bool(RE_DEF_ZH.match(head) or RE_DEF_ZH_BARE.match(head))
    m = RE_DEF_EN.match(head)
    return bool(m)


def _definition_terms(seg: str, lang: str) -> list[str]:
    out: list[str] = []
    rx = [RE_DEF_ZH, RE_DEF_ZH_BARE] if lang == "zh" else [RE_DEF_EN, RE_DEF_EN_PAREN]
    for r in rx:
        for m in r.finditer(seg):
            t = m.group(1).strip().rstrip(",.")
            if t and t not in out and len(t) >= 2:
                out.append(t)
    return out


def _find_xrefs(doc: Document, clauses: list[Clause], lang: str) -> None:
    text = doc.text
    paths: dict[tuple, str] = {}
    for c in clauses:
        if c.kind in {"numbered", "schedule", "paragraph"} and c.path:
            paths.setdefault(c.path, c.anchor)
    for c in clauses:
        seg = to_halfwidth(text[c.start:c.end])
        own_end = (c.label_end - c.start) if c.label_end is not None else 0
        for m in RE_XREF_ZH.finditer(seg):
            if m.start() < own_end:
                continue
            before = seg[max(0, m.start() - 3):m.start()]
            external = "》" in before or "法" in before[-1:]
            key = "第" + int_to_chinese(parse_number(m.group(1)) or 0) + "条"
            if m.group(2):
                key += "之" + int_to_chinese(parse_number(m.group(2)) or 0)
            if m.group(3):
                key += "第" + int_to_chinese(parse_number(m.group(3)) or 0) + "款"
            if m.group(4):
                key += "第" + int_to_chinese(parse_number(m.group(4)) or 0) + "项"
            anchor = None if external else (paths.get(_path_of(key)) or paths.get(_path_of(key)[:1]))
            c.xrefs.append(CrossRef(doc, c.start + m.start(), c.start + m.end(), target=key, anchor=anchor,
                                    external=external))
        if lang == "zh":
            continue
        for m in RE_XREF_EN.finditer(seg):
            if m.start() < own_end:
                continue  # the clause's own label ("Section 1.02 ...")
            word = m.group(1).lower()
            after = seg[m.end():m.end() + 40]
            external = bool(RE_EXTERNAL_EN.match(after))
            for r in RE_XREF_EN_ONE.finditer(m.group(2)):
                ref = r.group(0)
                if not ref:
                    continue
                s = c.start + m.start(2) + r.start()
                if word.startswith(("schedule", "exhibit", "annex", "append")):
                    key = f"{word[0].upper()}{word[1:].rstrip('s') if not word.startswith('append') else 'Appendix'} {ref}"
                    key = re.sub(r"^Annexe", "Annex", key)
                    target = next((cl.anchor for cl in clauses if cl.kind == "schedule" and cl.anchor.lower() == key.lower()), None)
                else:
                    key = ref
                    p = _path_of(ref)
                    if word.startswith("article") and ref.isalpha():
                        rn = roman_to_int(ref)
                        p = (rn,) if rn else p
                    target = paths.get(p)
                c.xrefs.append(CrossRef(doc, s, s + len(ref), target=key, anchor=None if external else target,
                                        external=external))
