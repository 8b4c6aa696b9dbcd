"""Mentions: every place in the text that refers to a target, found by rules and resolved.

Kinds of mention and how each resolves:
- numbered floats — "Figure 3", "Figs. 2 and 3", "Figures 2–4", "Table II", "Fig. 3a", "Fig. 3B",
  "Figure 3b-d", "见图1", "如图1所示", "图1-图3", "图表5", also with the label and number on two
  lines or the label hyphenated over a line break ("Fig-\nure 3"): each number to the target of
  that kind and number (ranges expand; "1-3" is a compound number where the document numbers per
  chapter, else a range; a Chinese "图5" may fall back to "图表5"). Each callout with its own label
  is its own mention ("图3和图4", "Fig. 1 and Fig. 2": two). "Figure 8 in [1]", "Fig. 2 of Young et
  al.", "[12, Fig. 3]", "原文图3", "文献[5]中的表2" are external and link to nothing, the reason
  quoting the words that said so; so is a float in a sentence about another work's float, unless
  words between them claim it for this document or set the two side by side ("our", "compared
  with", "本文"). "Supplementary Table 1" is not the body's Table 1;
- bare numbers — "根据3.2" in a sentence about 表3.2: that float, when no other float or section
  carries the number;
- deictic — "the table above", "the following figure", "上图", "下表", "如下图所示": the nearest
  target of that kind before (after) the mention in reading order;
- chains — "上述图表", "前文所述", "the figures mentioned earlier": the targets of the most recent
  earlier mention of that kind, followed through up to 3 mentions (cycles guarded);
- citations "[3]", "[1–4]", "[2, 5]", "(Smith et al., 2020)", "Smith and Lee (2019)" to
  bibliography entries; "Section 2.3", "§2", "第三节", "第2章", "Appendix A" to headings; "Eq. 4",
  "Eq. 36a‐36d" (a range), "公式 (3-1)", "式（A.3）" to numbered equations, one mention per number
  of a list ("Eq. 2.27 and 2.33": two), external ones ("… in [9]") linking nothing; superscript
  footnote markers and "footnote 4" to notes.
Where the PDF has internal links (hyperref), a link over the mention is extra evidence: it confirms
a choice, or picks among ambiguous candidates; nothing depends on it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

from pipelines.documents import Document, HasSpan, Span
from pipelines.reports.labels import (
    DASHES,
    DOT_LEADER,
    EN_MENTION_LABEL_RE,
    FLOAT_KINDS,
    KIN,
    NUM_RE_ZH,
    ZH_LABEL_RE,
    expand_range,
    label_kind,
    norm_number,
)
from pipelines.reports.layout import Layout, overlaps
from pipelines.text.numerals import parse_number

# ---------------------------------------------------------------------------------------------
# patterns

_NUM_EN = rf"(?:\d{{1,3}}(?:[{DASHES}.]\d{{1,3}}){{0,2}}|[A-Z][{DASHES}.]?\d{{1,3}}|[IVX]{{1,5}}\b)"
# a panel: "3(b)", "2 a)", "3b", "3B", and lists of panels "3b,c", "3b-d", "3(b, c)"
_LETTERS = rf"[a-hA-H](?:\s?[,{DASHES}]\s?[a-hA-H](?![\w]))*"
_PANEL_EN = rf"(?:\s?\(({_LETTERS})\)|\s([a-h])\)|({_LETTERS})(?![\w]))"
_ITEM_EN = rf"{_NUM_EN}(?:{_PANEL_EN})?"
_SEP_EN = rf"(?:\s*,\s*(?:and\s+|&\s*)?|\s+and\s+|\s*&\s*|\s*[{DASHES}]\s*|\s+to\s+|\s+through\s+)"
# a label word broken over two lines with a hyphen: "Fig-\nure 3", "Ta‐\nble 2"
_BREAK = rf"[{DASHES}]\s*\n\s*"
_EN_LABEL_BROKEN = "|".join(
    f"[{w[0].upper()}{w[0]}]{w[1:i]}{_BREAK}{w[i:]}{'s?' if plural else ''}"
    for w, plural in (("figure", True), ("table", True), ("exhibit", True), ("equation", True))
    for i in range(2, len(w) - 1)
)
_EN_LABEL = rf"(?:{_EN_LABEL_BROKEN}|{EN_MENTION_LABEL_RE})"
EN_FLOAT = re.compile(rf"\b(?P<label>{_EN_LABEL})\s*(?P<list>{_ITEM_EN}(?:{_SEP_EN}(?:{_EN_LABEL}\s*)?{_ITEM_EN})*)")
_ITEM_ZH = rf"{NUM_RE_ZH}(?:[a-h]\)?(?![A-Za-z])|\s?[(（][a-h][)）])?"
_SEP_ZH = rf"(?:\s*[{DASHES}~～至到]\s*|\s*[、,，和及与]\s*|\s*以及\s*)"
ZH_FLOAT = re.compile(rf"(?P<label>{ZH_LABEL_RE})\s*(?P<list>{_ITEM_ZH}(?:{_SEP_ZH}(?:{ZH_LABEL_RE})?\s*{_ITEM_ZH})*)")
# characters before 图/表 that make a different word (代表, 发表, 地图, 意图 …)
_ZH_NOT_LABEL_BEFORE = {"表": set("代发报列仪电手外课钟师年时"), "图": set("地意试企构蓝版宏力妄")}
_ITEM_SPLIT = re.compile(
    rf"(?P<sep>{_SEP_EN}|{_SEP_ZH})?(?P<label>{_EN_LABEL}|{ZH_LABEL_RE})?\s*(?P<num>{_NUM_EN}|{NUM_RE_ZH})(?P<panel>{_PANEL_EN}|[a-h]\)|\s?[(（][a-h][)）])?"
)

_EXTERNAL_AFTER = re.compile(
    # "(from [5])", "(adapted from Smith 2019)", "（引自文献[5]）"
    r"^\s*[(（]\s*(?:(?:adapted|reproduced|taken|redrawn|modified)\s+from|from|after|引自|摘自|转引自|来自|源自)\s*"
    r"(?:\[\d|文献|原文|[A-Z][\w'’-]+)|"
    r"^\s*[)\],]?\s*(?:in|of|from)\s+(?:\[\d|[Rr]efs?\.|[Rr]eferences?\s+\[?\d|the\s+original\b|"
    r"the\s+(?:cited\s+|source\s+|reference\s+)?(?:paper|article|publication|study|manuscript)\s+(?:by|of)\b|"
    r"(?:that|the\s+same|the\s+cited|the\s+source)\s+(?:paper|article|publication|study|manuscript|work)\b|"
    r"(?:their|his|her)\s+(?:paper|article|work|study)|[A-Z][\w'’-]+(?:\s+et\s+al\b|\s+(?:and|&)\s+[A-Z][\w'’-]+|,?\s*\(?(?:19|20)\d\d))"
)
# when no target carries the number: wording that says the figure is another work's
_OTHER_WORK = re.compile(r"reproduc|replicat|original|reported\s+in|in\s+the\s+(?:source|cited)\s+(?:paper|article|study)|原文|原论文|文献", re.IGNORECASE)
_EXTERNAL_BEFORE = re.compile(
    r"(?:\[\d+(?:\s*[,–-]\s*\d+)*\]|et al\.?|\((?:19|20)\d\d[a-z]?\))\s*(?:'s|’s|的|中的?)?\s*$"
    # inside a citation: "[12, Fig. 3]", "(Lee et al., 2019, Fig. 2)", "Lee et al. (2019, Figure 2)"
    r"|\[\s*\d{1,3}\s*[,;]\s*$"
    r"|(?:et al\.?\s*,?\s*\(?|\([A-Z][\w'’-]+(?:\s+(?:and|&)\s+[A-Z][\w'’-]+)?\s*,?\s*|[A-Z][\w'’-]+\s*\()"
    r"(?:19|20)\d\d[a-z]?\s*[,;:]\s*(?:pp?\.\s*\d+\s*[,;]\s*)?$"
    r"|(?:文献|原文|原论文|原研究)\s*(?:\[\d+(?:\s*[,–-]\s*\d+)*\])?\s*(?:的|中的?)?\s*$"
)
# a label prefix that names another set of floats than the numbered ones of the body
_SUPPLEMENT_BEFORE = re.compile(r"(?:Supplementary|Supplemental|Suppl\.|Extended\s+Data|Online|补充|附加)\s*$", re.IGNORECASE)
# words that claim a float for the document itself, or set it beside another work's (a comparison
# or a reproduction names two different floats)
_OWN_OR_CONTRAST = re.compile(r"\b(?:our|ours|this\s+(?:paper|report|study|work|article|replication|manuscript)|here|below|above|"
                              r"whereas|while|unlike|but|however|in\s+contrast|with|versus|vs|against|"
                              r"reproduc\w*|replicat\w*|compar\w*|match\w*|agree\w*|differ\w*|resembl\w*)\b|"
                              r"本文|本报告|本研究|我们|而|但|相比|对比|比较|复现|重现|一致|不同", re.IGNORECASE)
_OWN_CLAUSE = re.compile(r"\b(?:our|we|us|this\s+(?:paper|report|study|work|article|replication|manuscript))\b|本文|本报告|本研究|我们", re.IGNORECASE)
# sentence ends: . ! ? followed by a space or a line break (not "Fig." / "et al." / "Eq."), and CJK ends
_SENTENCE_END = re.compile(r"(?<!\bal)(?<!\bFig)(?<!\bFigs)(?<!\bEq)(?<!\bEqs)(?<!\bTab)(?<!\bNo)(?<!\bvs)(?<!\bSec)[.!?;](?=\s)|[。！？；]|\n\s*\n")

DEICTIC_EN = re.compile(
    r"\b(?:the|this|that|these|those)\s+(?:(?P<d1>above|preceding|previous|following|next|below|foregoing)\s+)?"
    r"(?P<kind>figure|table|chart|exhibit|graph|plot|diagram)(?P<pl>s)?(?:\s+(?P<d2>above|below))?\b",
    re.IGNORECASE,
)
DEICTIC_ZH = re.compile(r"(?P<d>以上|以下|如下|下列|上方|下方|上|下)(?P<kind>图表|图|表)(?![示现明达态彰决率演层情扬像谋])")
CHAIN_EN = re.compile(
    r"\b(?:the\s+)?(?:(?:aforementioned|above-mentioned|abovementioned|previously\s+mentioned)\s+(?P<k1>figure|table|chart|exhibit)(?P<p1>s)?"
    r"|(?P<k2>figure|table|chart|exhibit)(?P<p2>s)?\s+(?:mentioned|discussed|cited|referred\s+to|described)\s+(?:earlier|above|before|previously))\b",
    re.IGNORECASE,
)
CHAIN_ZH = re.compile(r"(?:上述|前述|前文所述的?|上文所述的?|前面提到的|上面提到的|前文提到的)(?P<kind>图表|图|表格?)?")

CITE_NUM = re.compile(r"\[(?P<body>\d{1,3}(?:\s*[-–—,，]\s*\d{1,3})*)\]")
CITE_PAREN = re.compile(r"[(（](?P<body>[^()（）\n]{0,160}?\b(?:19|20)\d\d[a-z]?)[)）]")
CITE_NARR = re.compile(r"\b(?P<name>[A-Z][\w'’-]+)(?P<rest>\s+et\s+al\.?|\s+(?:and|&)\s+[A-Z][\w'’-]+)?\s+\((?P<year>(?:19|20)\d\d[a-z]?)\)")
_AUTH_YEAR = re.compile(r"(?P<name>[A-Z][\w'’-]+)(?:\s+et\s+al\.?|\s+(?:and|&)\s+[A-Z][\w'’-]+)?,?\s+(?P<year>(?:19|20)\d\d[a-z]?)")

SECTION_EN = re.compile(r"\b(?:Sections?|Sects?\.|Secs?\.|§§?)\s*(?P<num>\d{1,2}(?:\.\d{1,2}){0,3})(?![\d.]\d)")
APPENDIX_M = re.compile(r"\b(?:Appendix|附录)\s*(?P<num>[A-Z])\b")
SECTION_ZH = re.compile(r"第\s*(?P<num>[一二三四五六七八九十百零〇两\d]{1,4})\s*(?P<unit>章|节|部分)")
_EQ_ITEM = rf"\(?(?:\d{{1,3}}(?:[{DASHES}.]\d{{1,3}})?[a-z]?|[A-Z][{DASHES}.]?\d{{1,3}})\)?"
_EQ_SEP = rf"(?:\s*,\s*(?:and\s+)?|\s+and\s+|\s*&\s*|\s*[{DASHES}]\s*|\s+to\s+)"
# "Eq. 4", "Eqs. (3)-(5)", "Eq. 2.27 and 2.33", "Eq. 36a‐36d": a list of numbers, ranges expanded
EQUATION_EN = re.compile(rf"\b(?:Eqs?\.|Equations?|Eqns?\.?)\s*(?P<list>{_EQ_ITEM}(?:{_EQ_SEP}{_EQ_ITEM})*)")
_EQ_ITEM_SPLIT = re.compile(rf"(?P<sep>{_EQ_SEP})?\(?(?P<num>\d{{1,3}}(?:[{DASHES}.]\d{{1,3}})?[a-z]?|[A-Z][{DASHES}.]?\d{{1,3}})\)?")
EQUATION_ZH = re.compile(rf"(?:公式|式)\s*[(（]\s*(?P<list>(?:\d{{1,3}}|[A-Z])(?:\s?[{DASHES}.]\s?\d{{1,3}})?)\s*[)）]")
FOOTNOTE_WORD = re.compile(r"\b(?:footnote|脚注|注)\s*(?P<num>\d{1,2})\b", re.IGNORECASE)


# a cue that points at a source, then a bare compound number ("根据3.2", "见 2-1", "according to 3.2");
# not a quantity ("根据3.2亿元") or another kind of number ("根据2.1节"), and never a plain "3", which is more often a count than a label
_BARE_NUMBER = re.compile(
    rf"(?P<cue>根据|依据|参见|参照|见|按照|(?<![A-Za-z])(?:according\s+to|see)\s)\s*(?P<num>\d{{1,3}}(?:[{DASHES}.．]\d{{1,3}}){{1,2}})(?![{DASHES}.．]?\d)(?![0-9A-Za-z%％亿万千百元倍年月日个次家人台辆吨节章条款页项段式])"
)


def _eq_range(a: str, b: str) -> list[str] | None:
    """Equation numbers from a to b: '36a'-'36d' -> 36a, 36b, 36c, 36d; '3'-'5' -> 3, 4, 5."""
    ma, mb = re.fullmatch(r"(.*?)([a-z])", a), re.fullmatch(r"(.*?)([a-z])", b)
    if ma and mb and ma.group(1) == mb.group(1) and ma.group(2) < mb.group(2):
        return [ma.group(1) + chr(c) for c in range(ord(ma.group(2)), ord(mb.group(2)) + 1)]
    if mb and not ma and a == mb.group(1):  # "36-36d" read as 36a-36d is not safe: leave it
        return None
    return expand_range(a, b)


@dataclass
class Ref:
    """A target as the resolver sees it: its id, kind and number, where it begins in the document's
    text (a position for reading order, not a range) and its caption or heading text (whitespace
    runs joined, so not a slice of the document)."""

    id: str
    kind: str
    number: str
    start: int  # reading-order position (caption / heading start)
    page: int
    text: str = ""


@dataclass
class Found(HasSpan):
    """A mention during resolution: its `Span` of the document's text and what it resolved to."""

    span: Span
    kind: str
    targets: list[str] = field(default_factory=list)
    resolution: str = "internal"
    confidence: float = 0.0
    reason: str = ""
    hops: int = 0
    why: str | None = None
    candidates: list[str] = field(default_factory=list)
    panel: str | None = None
    target_kind: str | None = None  # for chains/deictics: the kind asked for
    antecedent: int | None = None  # index of the mention a chain follows
    dropped_targets: list[str] = field(default_factory=list)  # what a number match linked before a rule made it external


class Resolver:
    """Finds and resolves the mentions of one document against its targets."""

    def __init__(self, doc: Document, layout: Layout, refs: list[Ref], excluded: list[tuple[int, int]]):
        self.doc = doc
        self.layout = layout
        self.refs = refs
        self.excluded = sorted(excluded)
        self.by_id: dict[str, Ref] = {r.id: r for r in refs}
        self.by_key: dict[tuple[str, str], list[Ref]] = {}
        for r in refs:
            self.by_key.setdefault((r.kind, r.number), []).append(r)
        floats = [r for r in refs if r.kind in FLOAT_KINDS]
        # per-chapter numbering ("2-1") makes "1-3" a number, not a range
        self.compound = any("-" in r.number for r in floats)
        self.no_text_pages = [int(p) for p in doc.metadata.get("pages_without_text", "").split(",") if p.strip().isdigit()]
        self.bib = [r for r in refs if r.kind == "reference"]
        self.bib_numbered = any(r.number for r in self.bib)
        self.heading_texts = {r.text.strip() for r in refs if r.kind == "section"}
        self.skip_lines = self._skip_lines()

    # -- helpers -------------------------------------------------------------------------------

    def _skip_lines(self) -> list[tuple[int, int]]:
        """Table-of-contents lines and repeated copies of headings (running heads): no mentions."""
        out = []
        for ln in self.layout.lines:
            t = ln.text.strip()
            if DOT_LEADER.search(t) or (t in self.heading_texts and not any(r.start == ln.start for r in self.refs)):
                out.append((ln.start, ln.end))
        return out

    def _is_excluded(self, start: int, end: int) -> bool:
        for a, b in self.excluded:
            if a >= end:
                break
            if start < b and a < end:
                return True
        return any(a <= start < b for a, b in self.skip_lines)

    def _links_for(self, start: int, end: int) -> list:
        page = self.doc.page_of(start)
        pl = self.layout.pages.get(page)
        box = self.doc.bbox_of(start, end)
        if pl is None or box is None or not pl.links:
            return []
        return [lk for lk in pl.links if overlaps(lk.bbox, box, 1.0)]

    def _ref(self, rid: str) -> Ref:
        return self.by_id[rid]

    # -- numbered floats -----------------------------------------------------------------------

    def find_floats(self) -> list[Found]:
        found: list[Found] = []
        text = self.doc.text
        for rx, zh in ((ZH_FLOAT, True), (EN_FLOAT, False)):
            pos = 0
            while (m := rx.search(text, pos)) is not None:
                s, e = m.start(), self._same_kind_end(m)
                pos = e
                if e < m.end():  # "Table II and Fig. 3a": two mentions; match again from the cut
                    m = rx.match(text, s, e)
                    if m is None:
                        pos = s + 1
                        continue
                label = m.group("label")
                if zh and s > 0 and text[s - 1] in _ZH_NOT_LABEL_BEFORE.get(label[-1], set()) and label in ("图", "表"):
                    continue
                if zh and label == "表" and s > 0 and text[s - 1] == "图":
                    continue  # 图表 is matched as one label
                if self._is_excluded(s, e):
                    continue
                e = self._trim_end(m, zh)
                external = self._external_evidence(s, e)
                for ps, pe, list_start in self._callouts(m, s, e):
                    found.append(self._resolve_float(ps, pe, list_start, external))
        self._external_by_sentence(found)
        return found

    def _same_kind_end(self, m: re.Match) -> int:
        """End of the part of a match whose labels all name the first label's kind."""
        kind0 = label_kind(m.group("label"))
        base = m.start("list")
        for it in _ITEM_SPLIT.finditer(m.group("list")):
            if it.group("label") and label_kind(it.group("label")) != kind0:
                return base + it.start()
        return m.end()

    def _trim_end(self, m: re.Match, zh: bool) -> int:
        e = m.end()
        while e > m.start() and self.doc.text[e - 1] in " \n,，、-–—~～":
            e -= 1
        return e

    def _callouts(self, m: re.Match, s: int, e: int) -> list[tuple[int, int, int]]:
        """(start, end, start of the number list) of each callout of a match: "图3和图4" and
        "Fig. 1 and Fig. 2" are two callouts, each with its own label; "Figs. 2 and 3" and the
        range "图1-图3" are one."""
        base = m.start("list")
        cuts: list[tuple[int, int, int]] = []  # (end of the previous callout, start of this one, its list start)
        for it in _ITEM_SPLIT.finditer(self.doc.text[base:e]):
            sep = (it.group("sep") or "").strip()
            if it.start() == 0 or not it.group("label") or self._is_range_sep(sep):
                continue
            cuts.append((base + it.start(), base + it.start("label"), base + it.end("label")))
        out: list[tuple[int, int, int]] = []
        start, list_start = s, base
        for prev_end, next_start, next_list in cuts:
            out.append((start, prev_end, list_start))
            start, list_start = next_start, next_list
        out.append((start, e, list_start))
        return out

    @staticmethod
    def _is_range_sep(sep: str) -> bool:
        return bool(sep) and (sep in DASHES or sep in ("~", "～", "至", "到", "to", "through"))

    def _external_evidence(self, s: int, e: int) -> str | None:
        """The words next to a mention that say it names another work's figure, table or equation
        ("… in [12]", "… of the original study", "from Lee et al.", "原文图3", "文献[5]中的表2"), or None."""
        text = self.doc.text
        after = text[e:e + 80]
        if (m := _EXTERNAL_AFTER.match(after)) is not None:
            end = m.end() + len(re.match(r"[\w\]]*", after[m.end():]).group(0))
            return re.sub(r"\s+", " ", after[:end].strip())[:40]
        before = text[max(0, s - 40):s]
        if (m := _EXTERNAL_BEFORE.search(before)) is not None:
            return re.sub(r"\s+", " ", m.group(0).strip())[-40:]
        return None

    def _sentence(self, s: int, e: int) -> tuple[int, int]:
        """Bounds of the sentence around [s, e): from the last sentence end before s to the first after e."""
        text = self.doc.text
        lo = max(0, s - 300)
        ends = [m.end() for m in _SENTENCE_END.finditer(text, lo, s)]
        a = ends[-1] if ends else lo
        m = _SENTENCE_END.search(text, e, min(len(text), e + 300))
        return a, (m.start() if m else min(len(text), e + 300))

    def _external_by_sentence(self, found: list[Found]) -> None:
        """A mention in a sentence about another work's float of the same kind ("Table 5" in a
        sentence about "Supplementary Table 1 from Lee et al.") is external too, unless words
        between them claim it for this document or set it against the other work ("our", "this
        paper", "whereas", "本文")."""
        explicit = [f for f in found if f.resolution == "external" and f.reason.startswith("external:")]
        if not explicit:
            return
        text = self.doc.text
        for f in found:
            if f.resolution == "external" or f.kind not in FLOAT_KINDS:
                continue
            a, b = self._sentence(f.start, f.end)
            for x in explicit:
                if x is f or not (a <= x.start < b) or (x.kind != f.kind and x.kind not in KIN.get(f.kind, ())):
                    continue
                lo, hi = (x.end, f.start) if x.start < f.start else (f.end, x.start)
                clause = re.split(r"[,;:，；：.。]", text[f.end:b], maxsplit=1)[0]  # what the mention's clause says of it
                if (_OWN_OR_CONTRAST.search(text[lo:hi]) or _OWN_OR_CONTRAST.search(text[max(a, f.start - 25):f.start])
                        or _OWN_CLAUSE.search(clause)):
                    continue
                f.dropped_targets = list(f.targets)
                f.targets, f.candidates, f.why = [], [], None
                f.resolution, f.confidence = "external", 0.75
                said = x.reason.split("('", 1)[-1].rstrip("')")
                other = re.sub(r"\s+", " ", x.text)
                f.reason = f"external: in a sentence about another work's {x.kind} ('{other} {said}')"
                break

    def find_bare_numbers(self, floats: list[Found]) -> list[Found]:
        """A bare number that names a float by its number alone ("表3.2列出了分项数据，根据3.2可知…"):
        inside a sentence that mentions that float, after a word that points at a source ("根据",
        "见", "according to"), and only when it is unambiguous (one float of that kind and number,
        no section of that number)."""
        out: list[Found] = []
        text = self.doc.text
        sections = {r.number for r in self.refs if r.kind == "section"}
        seen: set[int] = set()
        for f in floats:
            if f.resolution != "internal" or len(f.targets) != 1 or f.kind not in FLOAT_KINDS:
                continue
            ref = self._ref(f.targets[0])
            hits, _ = self._lookup(ref.kind, ref.number)
            if len(hits) != 1 or ref.number in sections or norm_number(ref.number) != ref.number:
                continue
            a, b = self._sentence(f.start, f.end)
            for m in _BARE_NUMBER.finditer(text, a, b):
                s, e = m.start("num"), m.end("num")
                if s in seen or f.start <= s < f.end or norm_number(m.group("num")) != ref.number or self._is_excluded(s, e):
                    continue
                seen.add(s)
                about = re.sub(r"\s+", " ", f.span.text)
                out.append(Found(Span(self.doc, s, e), ref.kind, targets=[ref.id], confidence=0.7,
                                 reason=f"bare number: '{m.group('num')}' after '{m.group('cue').strip()}' in a sentence about "
                                        f"'{about}' (the only {ref.kind} of that number; no section of it)"))
        return out

    def _resolve_float(self, s: int, e: int, list_start: int, external: str | None) -> Found:
        text = self.doc.text
        kind0 = label_kind(text[s:list_start].strip()) or "figure"
        items = self._items(text[list_start:e], kind0)
        f = Found(Span(self.doc, s, e), kind0)
        for _, _, panel, _ in items:
            f.panel = f.panel or panel
        if external is not None:
            f.resolution = "external"
            f.confidence = 0.85
            f.reason = f"external: refers to another work's {kind0} ('{external}')"
            return f
        if _SUPPLEMENT_BEFORE.search(text[max(0, s - 25):s]):
            f.resolution, f.why, f.confidence = "unresolved", "no_such_number", 0.0
            f.reason = f"a supplementary {kind0}: not one of the document's numbered {kind0}s"
            return f
        targets: list[str] = []
        notes: list[str] = []
        missing: list[str] = []
        ambiguous: list[list[str]] = []
        conf = 0.95
        for kind, number, _panel, rng_from in items:
            numbers = [number]
            if rng_from is not None:
                numbers = expand_range(rng_from, number) or [rng_from, number]
                notes.append(f"range {rng_from}–{number} expanded")
                conf = min(conf, 0.92)
            elif "-" in number and not self.compound and not self._lookup(kind, number)[0]:
                a, b = number.split("-", 1)
                if (exp := expand_range(a, b)) is not None:
                    numbers = exp
                    notes.append(f"'{number}' read as a range (numbering is not per chapter)")
                    conf = min(conf, 0.85)
            for n in numbers:
                hits, via = self._lookup(kind, n)
                if len(hits) == 1:
                    targets.append(hits[0].id)
                    if via != kind:
                        notes.append(f"no {kind} {n}; took {via} {n}")
                        conf = min(conf, 0.7)
                elif len(hits) > 1:
                    ambiguous.append([h.id for h in hits])
                else:
                    missing.append(f"{kind} {n}")
        links = self._links_for(s, e)
        for cands in ambiguous:
            picked = [c for c in cands if any(lk.dest_page == self._ref(c).page for lk in links)]
            if len(picked) == 1:
                targets.append(picked[0])
                notes.append("hyperlink picks between same-numbered targets")
            else:
                f.candidates.extend(cands)
        if targets:
            f.targets = list(dict.fromkeys(targets))
            f.confidence = conf
            f.reason = "number match" + (": " + "; ".join(notes) if notes else "")
            if missing:
                f.reason += f"; not found: {', '.join(missing)}"
                f.confidence = min(f.confidence, 0.6)
            self._link_evidence(f, links)
        elif f.candidates:
            f.resolution = "ambiguous"
            f.why = "ambiguous"
            f.confidence = 0.3
            f.reason = f"ambiguous: {len(f.candidates)} targets carry this number"
        else:
            f.resolution = "unresolved"
            f.confidence = 0.0
            context = text[max(0, s - 80):s] + " " + text[e:e + 40]
            if (hint := _OTHER_WORK.search(context)) and not self.no_text_pages:
                f.resolution = "external"
                f.confidence = 0.6
                f.reason = f"external (inferred): no {', '.join(missing)} in this document and the context points to another work ('{hint.group(0)}')"
            elif self.no_text_pages:
                f.why = "no_text_layer"
                f.reason = f"no {', '.join(missing)} in the text; pages {', '.join(map(str, self.no_text_pages))} have no text layer and may hold it"
            else:
                f.why = "no_such_number"
                f.reason = f"no {', '.join(missing)} in this document (it may belong to another work)"
        return f

    def _items(self, s: str, kind0: str) -> list[tuple[str, str, str | None, str | None]]:
        """(kind, number, panel, range start or None) for each number in a mention's list."""
        out: list[tuple[str, str, str | None, str | None]] = []
        kind = kind0
        prev: str | None = None
        for m in _ITEM_SPLIT.finditer(s):
            sep = (m.group("sep") or "").strip()
            if m.group("label"):
                kind = label_kind(m.group("label")) or kind
            number = norm_number(m.group("num"))
            panel = None
            if m.group("panel"):
                panel = re.sub(r"[\s()（）]", "", m.group("panel")) or None
            is_range = self._is_range_sep(sep)
            out.append((kind, number, panel, prev if is_range and prev else None))
            prev = number
        return out

    def _lookup(self, kind: str, number: str) -> tuple[list[Ref], str]:
        hits = self.by_key.get((kind, number), [])
        if hits:
            return hits, kind
        # appendix numbers printed two ways: "A1" / "A-1"
        alt = re.sub(r"^([A-Z])-?(\d)", lambda m: m.group(1) + ("" if "-" in number[:2] else "-") + m.group(2), number)
        if alt != number and (hits := self.by_key.get((kind, alt), [])):
            return hits, kind
        for k in KIN.get(kind, ()):
            hits = self.by_key.get((k, number), [])
            if hits:
                return hits, k
        return [], kind

    def _link_evidence(self, f: Found, links: list) -> None:
        if not links or not f.targets:
            return
        pages = {self._ref(t).page for t in f.targets}
        if any(lk.dest_page in pages for lk in links):
            f.confidence = min(0.99, f.confidence + 0.04)
            f.reason += "; the PDF's internal link agrees"
        else:
            f.confidence = max(0.3, f.confidence - 0.25)
            f.reason += f"; but the PDF's internal link goes to page {links[0].dest_page}"

    # -- deictic and chains --------------------------------------------------------------------

    def find_deictic(self) -> list[Found]:
        out: list[Found] = []
        text = self.doc.text
        for m in DEICTIC_EN.finditer(text):
            d = (m.group("d1") or m.group("d2") or "").lower()
            if not d or self._is_excluded(m.start(), m.end()):
                continue
            kind = {"graph": "figure", "plot": "figure", "diagram": "figure"}.get(m.group("kind").lower(), m.group("kind").lower())
            direction = "before" if d in ("above", "preceding", "previous", "foregoing") else "after"
            out.append(self._resolve_deictic(m.start(), m.end(), kind, direction))
        for m in DEICTIC_ZH.finditer(text):
            if self._is_excluded(m.start(), m.end()):
                continue
            kind = {"图": "figure", "表": "table", "图表": "exhibit"}[m.group("kind")]
            direction = "before" if m.group("d") in ("以上", "上方", "上") else "after"
            out.append(self._resolve_deictic(m.start(), m.end(), kind, direction))
        return out

    def _resolve_deictic(self, s: int, e: int, kind: str, direction: str) -> Found:
        f = Found(Span(self.doc, s, e), "deictic", target_kind=kind)
        kinds = {kind, *KIN.get(kind, ())} if kind != "exhibit" else set(FLOAT_KINDS)
        cands = [r for r in self.refs if r.kind in kinds]
        if direction == "before":
            cands = [r for r in cands if r.start < s]
            best = max(cands, key=lambda r: r.start) if cands else None
        else:
            cands = [r for r in cands if r.start > e]
            best = min(cands, key=lambda r: r.start) if cands else None
        if best is None:
            f.resolution, f.why, f.confidence = "unresolved", "no_target_in_direction", 0.0
            f.reason = f"no {kind} {'before' if direction == 'before' else 'after'} this point in reading order"
            return f
        page = self.doc.page_of(s)
        dist = abs(best.page - page)
        f.targets = [best.id]
        f.confidence = 0.85 if dist == 0 else 0.75 if dist == 1 else 0.5
        f.reason = f"deictic: nearest {best.kind} {'before' if direction == 'before' else 'after'} it in reading order ({dist} page(s) away)"
        if best.kind != kind:
            f.reason += f"; no {kind} there, took {best.kind}"
        self._link_evidence(f, self._links_for(s, e))
        return f

    def find_chains(self) -> list[Found]:
        out: list[Found] = []
        for m in CHAIN_EN.finditer(self.doc.text):
            if self._is_excluded(m.start(), m.end()):
                continue
            k = (m.group("k1") or m.group("k2")).lower()
            f = Found(Span(self.doc, m.start(), m.end()), "chain", target_kind=k)
            f.candidates = ["plural"] if (m.group("p1") or m.group("p2")) else []
            out.append(f)
        for m in CHAIN_ZH.finditer(self.doc.text):
            if self._is_excluded(m.start(), m.end()):
                continue
            k = {"图表": "exhibit", "图": "figure", "表": "table", "表格": "table"}.get(m.group("kind") or "", None)
            f = Found(Span(self.doc, m.start(), m.end()), "chain", target_kind=k)
            f.candidates = ["plural"] if m.group("kind") == "图表" else []
            if not m.group("kind"):
                f.candidates = ["vague"]
            out.append(f)
        return out

    def resolve_chains(self, mentions: list[Found]) -> None:
        """Chains take the targets of the most recent earlier mention of their kind; when that
        mention is a chain too, follow it (at most 3 hops; a revisited mention stops the walk)."""
        mentions.sort(key=lambda x: (x.start, x.end))
        for i, f in enumerate(mentions):
            if f.kind != "chain":
                continue
            plural = f.candidates == ["plural"]
            vague = f.candidates == ["vague"]
            f.candidates = []
            kinds = {f.target_kind, *KIN.get(f.target_kind, ())} if f.target_kind and f.target_kind != "exhibit" else set(FLOAT_KINDS)
            ante: list[int] = []  # the two most recent earlier mentions of a matching target
            for j in range(i - 1, -1, -1):
                mj = mentions[j]
                if mj.kind in {*FLOAT_KINDS, "deictic", "chain"} and mj.resolution == "internal" and (
                        mj.kind == "chain" or any(self._ref(t).kind in kinds for t in mj.targets)):
                    ante.append(j)
                    if len(ante) == 2:
                        break
            if not ante:
                f.resolution, f.why, f.confidence = "unresolved", "no_antecedent", 0.0
                f.reason = "mention of a mention: no earlier mention of a matching target"
                continue
            # the antecedent is earlier and already resolved; walk its chain to bound the hops and
            # to guard against loops
            seen = {i}
            j, depth = ante[0], 1
            while mentions[j].kind == "chain" and mentions[j].antecedent is not None and j not in seen:
                seen.add(j)
                j = mentions[j].antecedent
                depth += 1
            if depth > 3 or j in seen:
                f.resolution, f.why, f.confidence = "unresolved", "no_antecedent", 0.0
                f.reason = "mention of a mention: the chain is longer than 3 hops or loops"
                continue
            f.antecedent = ante[0]
            targets = [t for t in mentions[ante[0]].targets if self._ref(t).kind in kinds] or mentions[ante[0]].targets
            if plural and len(targets) == 1 and len(ante) > 1:
                more = [t for t in mentions[ante[1]].targets if self._ref(t).kind in kinds and t not in targets]
                targets = more + targets  # in reading order: the earlier mention's first
            f.targets = targets
            f.hops = depth
            f.confidence = round(max(0.3, mentions[ante[0]].confidence * (0.5 if vague else 0.8)), 3)
            f.reason = f"mention of a mention: follows '{self.doc.text[mentions[ante[0]].start:mentions[ante[0]].end]}' ({f.hops} hop(s))"
            if vague:
                f.reason += "; a vague back-reference, it may mean the earlier text rather than a figure or table"

    # -- citations, sections, equations, footnotes ----------------------------------------------

    def find_citations(self) -> list[Found]:
        out: list[Found] = []
        text = self.doc.text
        if not self.bib:
            return out
        if self.bib_numbered:
            by_num = {r.number: r for r in self.bib if r.number}
            labels = self._list_labels()
            for m in CITE_NUM.finditer(text):
                if self._is_excluded(m.start(), m.end()) or m.start() in labels:
                    continue
                nums: list[str] = []
                for part in re.split(r"\s*[,，]\s*", m.group("body")):
                    bits = re.split(rf"\s*[{DASHES}]\s*", part)
                    if len(bits) == 2 and (exp := expand_range(bits[0], bits[1])):
                        nums.extend(exp)
                    else:
                        nums.extend(b for b in bits if b)
                f = Found(Span(self.doc, m.start(), m.end()), "citation")
                hits = [by_num[n].id for n in nums if n in by_num]
                miss = [n for n in nums if n not in by_num]
                self._settle_simple(f, hits, miss, "bibliography entry", 0.95)
                out.append(f)
        for m in list(CITE_PAREN.finditer(text)) + list(CITE_NARR.finditer(text)):
            if self._is_excluded(m.start(), m.end()):
                continue
            body = m.group("body") if "body" in m.groupdict() and m.groupdict().get("body") else m.group(0)
            parts = list(_AUTH_YEAR.finditer(body))
            if not parts:
                continue
            f = Found(Span(self.doc, m.start(), m.end()), "citation")
            hits: list[str] = []
            miss: list[str] = []
            amb: list[str] = []
            for p in parts:
                cands = [r for r in self.bib if p.group("name") in r.text and p.group("year")[:4] in r.text]
                if len(cands) == 1:
                    hits.append(cands[0].id)
                elif len(cands) > 1:
                    year_exact = [r for r in cands if p.group("year") in r.text]
                    (hits.append(year_exact[0].id) if len(year_exact) == 1 else amb.extend(r.id for r in cands))
                else:
                    miss.append(f"{p.group('name')} {p.group('year')}")
            if amb and not hits:
                f.resolution, f.why, f.confidence, f.candidates = "ambiguous", "ambiguous", 0.3, amb
                f.reason = "author-year matches several bibliography entries"
            else:
                self._settle_simple(f, hits, miss, "bibliography entry by author and year", 0.85)
            out.append(f)
        return out

    def _list_labels(self) -> set[int]:
        """Offsets of "[n]" that label the items of a numbered list (a second publication list, a
        bibliography not recognised as one): at a line start, with "[n-1]" or "[n+1]" starting a
        line nearby."""
        starts: list[tuple[int, int, int]] = []  # (line index, number, offset)
        for k, ln in enumerate(self.layout.lines):
            m = re.match(r"\s*\[(\d{1,3})\]", ln.text)
            if m:
                starts.append((k, int(m.group(1)), ln.start + m.start(0) + ln.text[m.start(0):].index("[")))
        out: set[int] = set()
        for k, n, off in starts:
            if any(abs(k2 - k) <= 6 and abs(n2 - n) == 1 for k2, n2, _ in starts):
                out.add(off)
        return out

    def _settle_simple(self, f: Found, hits: list[str], miss: list[str], what: str, conf: float) -> None:
        if hits:
            f.targets = list(dict.fromkeys(hits))
            f.confidence = conf if not miss else 0.6
            f.reason = f"{what}" + (f"; not found: {', '.join(miss)}" if miss else "")
            self._link_evidence(f, self._links_for(f.start, f.end))
        else:
            f.resolution, f.why, f.confidence = "unresolved", "no_entry" if f.kind == "citation" else "no_such_number", 0.0
            f.reason = f"no {what.split(' by ')[0]} {', '.join(miss)}"

    def find_sections(self) -> list[Found]:
        out: list[Found] = []
        text = self.doc.text
        secs = {r.number: r for r in self.refs if r.kind == "section"}
        for m in SECTION_EN.finditer(text):
            if self._is_excluded(m.start(), m.end()):
                continue
            f = Found(Span(self.doc, m.start(), m.end()), "section")
            n = m.group("num")
            self._settle_simple(f, [secs[n].id] if n in secs else [], [] if n in secs else [n], "section", 0.9)
            out.append(f)
        for m in APPENDIX_M.finditer(text):
            key = f"appendix-{m.group('num')}"
            if self._is_excluded(m.start(), m.end()) or key not in secs:
                continue
            f = Found(Span(self.doc, m.start(), m.end()), "section")
            self._settle_simple(f, [secs[key].id], [], "appendix heading", 0.85)
            out.append(f)
        for m in SECTION_ZH.finditer(text):
            if self._is_excluded(m.start(), m.end()):
                continue
            n = parse_number(m.group("num"), digit_by_digit=False)
            if n is None:
                continue
            key = f"{m.group('unit')}{n}"
            f = Found(Span(self.doc, m.start(), m.end()), "section")
            if key in secs:
                self._settle_simple(f, [secs[key].id], [], "heading", 0.9)
            elif f"cn{n}" in secs:
                self._settle_simple(f, [secs[f"cn{n}"].id], [], f"top-level heading numbered {m.group('num')}", 0.8)
            elif str(n) in secs:
                self._settle_simple(f, [secs[str(n)].id], [], f"section numbered {n}", 0.7)
            else:
                self._settle_simple(f, [], [m.group(0)], "section", 0.0)
            out.append(f)
        return out

    def find_equations(self) -> list[Found]:
        """Equation mentions, one per "Eq."/"式" with every number of its list ("Eq. 2.27 and 2.33",
        ranges "Eq. 36a‐36d" expanded); "Eq. 2.31 in [9]" is external and links to nothing. Without
        numbered equations in the document only the external ones are reported."""
        out: list[Found] = []
        eqs = {r.number: r for r in self.refs if r.kind == "equation"}
        text = self.doc.text
        for rx in (EQUATION_EN, EQUATION_ZH):
            for m in rx.finditer(text):
                s, e = m.start(), m.end()
                while e > s and text[e - 1] in f" \n,{DASHES}":
                    e -= 1
                if self._is_excluded(s, e):
                    continue
                external = self._external_evidence(s, e)
                if not eqs and external is None:
                    continue
                # one mention per number, a range staying whole: "Eq. 2.27 and 2.33" is two
                parts: list[tuple[int, int, list[str]]] = []
                base, prev = m.start("list"), None
                for it in _EQ_ITEM_SPLIT.finditer(text[base:e]):
                    n = norm_number(it.group("num"))
                    sep = (it.group("sep") or "").strip()
                    if parts and prev is not None and self._is_range_sep(sep):
                        ps, _, nums = parts[-1]
                        parts[-1] = (ps, base + it.end(), nums + [x for x in (_eq_range(prev, n) or [n]) if x not in nums])
                    else:
                        parts.append((s if not parts else base + it.end("sep") if it.group("sep") else base + it.start(), base + it.end(), [n]))
                    prev = n
                if parts:  # the last part ends where the match does ("式（A.3）" keeps its bracket)
                    parts[-1] = (parts[-1][0], e, parts[-1][2])
                for ps, pe, nums in parts:
                    f = Found(Span(self.doc, ps, pe), "equation")
                    if external is not None:
                        f.resolution, f.confidence = "external", 0.85
                        f.reason = f"external: refers to another work's equation ('{external}')"
                    else:
                        self._settle_simple(f, [eqs[n].id for n in nums if n in eqs], [n for n in nums if n not in eqs], "equation", 0.9)
                    out.append(f)
        return out

    def find_footnote_marks(self) -> list[Found]:
        """Superscript markers in the body (small, raised characters) and 'footnote 4'."""
        notes = [r for r in self.refs if r.kind == "footnote"]
        if not notes:
            return []
        out: list[Found] = []
        text = self.doc.text
        boxes = self.doc.char_boxes
        note_spans = [(r.start, r.start + len(r.text)) for r in notes]
        for r in notes:
            mark = r.number
            pages = {r.page, r.page - 1}
            for pg in self.doc.pages:
                if pg.number not in pages:
                    continue
                seg = text[pg.char_start:pg.char_end]
                for m in re.finditer(re.escape(mark), seg):
                    s = pg.char_start + m.start()
                    e = s + len(mark)
                    if any(a <= s < b for a, b in note_spans) or self._is_excluded(s, e):
                        continue
                    if s < 2 or text[s - 1].isdigit() or (e < len(text) and text[e].isdigit()):
                        continue
                    if text[s - 1].isspace() and not self._glued(s):
                        continue
                    if boxes is None or not self._raised(s, e):
                        continue
                    f = Found(Span(self.doc, s, e), "footnote", targets=[r.id], confidence=0.85, reason="superscript marker matching the note at the page foot")
                    out.append(f)
        for m in FOOTNOTE_WORD.finditer(text):
            hits = [r.id for r in notes if r.number == m.group("num")]
            if self._is_excluded(m.start(), m.end()):
                continue
            f = Found(Span(self.doc, m.start(), m.end()), "footnote")
            self._settle_simple(f, hits[:1], [] if hits else [m.group("num")], "footnote", 0.8)
            out.append(f)
        return out

    def _glued(self, s: int) -> bool:
        """A space before offset s that ingest inserted (no box) between two characters that touch."""
        boxes = self.doc.char_boxes
        if boxes is None or self.doc.text[s - 1] != " " or not np.isnan(boxes[s - 1][0]) or np.isnan(boxes[s - 2][0]):
            return False
        height = float(boxes[s - 2][3] - boxes[s - 2][1])
        return 0 <= float(boxes[s][0] - boxes[s - 2][2]) < 0.25 * max(height, 1.0)

    def _raised(self, s: int, e: int) -> bool:
        boxes = self.doc.char_boxes
        mark = boxes[s:e]
        if np.isnan(mark[:, 0]).any():
            return False
        lo, hi = max(0, s - 7), s
        ctx = boxes[lo:hi]
        ctx = ctx[~np.isnan(ctx[:, 0])]
        if not len(ctx):
            return False
        h_ctx = float(np.median(ctx[:, 3] - ctx[:, 1]))
        h_mark = float(np.max(mark[:, 3] - mark[:, 1]))
        return h_mark < 0.8 * h_ctx and float(np.min(mark[:, 3])) < float(np.median(ctx[:, 3])) - 0.15 * h_ctx
