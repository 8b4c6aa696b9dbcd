"""The structure of one claim: category, preamble, transitional phrase and body elements.

Category comes from the subject of the preamble (the noun phrase before "for", "of",
"according to", ...): its last keyword decides (English heads come last, and so do Chinese ones),
and an English subject without a keyword is an apparatus (a thing). The transitional phrase of
an independent claim is the first one that ends in a colon, else the first strong one
(comprising, consisting (essentially) of, including, characterised in that/by, wherein), else a
weak one (having, containing); of a dependent claim, the first one after its reference phrase.
Elements are the body after the transition, split on ";", line breaks, ":" and "(a)" / "a)"
markers, and for Chinese on "；", "。" and "：" (and, in a body without "；", before each clause
that starts with "所述", "其中" or "以及").
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from pipelines.patents.text import trim

CATEGORIES = ("method", "apparatus", "composition", "medium", "use", "unknown")

# the category each English subject noun names
_EN_CATEGORY_WORDS = {
    word: category
    for category, words in {
        "method": "method methods process processes procedure",
        "apparatus": "apparatus device devices system systems machine assembly circuit product",
        "composition": "composition compositions compound compounds formulation mixture alloy emulsion blend "
                       "medicament vaccine",
        "medium": "medium media program software",
        "use": "use",
    }.items()
    for word in words.split()
}
_EN_SUBJECT_STOP = re.compile(
    r"\s(?:for|of|to|in|on|at|by|with|which|that|wherein|whereby|according|as|comprising|comprises|consisting"
    r"|including|includes|having|characteri[sz]ed|containing|configured|adapted|operable|being|using|when)\b|[,:;(]",
    re.IGNORECASE,
)
_CN_CATEGORY = [
    ("方法", "method"), ("工艺", "method"), ("用途", "use"), ("应用", "use"), ("组合物", "composition"),
    ("化合物", "composition"), ("制剂", "composition"), ("合金", "composition"), ("混合物", "composition"),
    ("药物", "composition"), ("介质", "medium"), ("程序产品", "medium"), ("计算机程序", "medium"),
    ("装置", "apparatus"), ("设备", "apparatus"), ("系统", "apparatus"), ("器", "apparatus"), ("机", "apparatus"),
    ("仪", "apparatus"), ("结构", "apparatus"), ("组件", "apparatus"), ("电路", "apparatus"), ("终端", "apparatus"),
    ("模块", "apparatus"), ("芯片", "apparatus"), ("产品", "apparatus"), ("材料", "composition"),
]
_CN_SUBJECT_STOP = re.compile(r"[,:;。]|其特征|包括|包含|含有|其中")

_EN_TRANSITION = re.compile(
    r"\b(?:(?P<consisting_essentially_of>consisting\s+essentially\s+of)"
    r"|(?P<consisting_of>consisting\s+of|composed\s+of)"
    r"|(?P<characterized>characteri[sz]ed\s+(?:in\s+that|by)|the\s+improvement\s+(?:comprising|comprises|wherein|which\s+comprises))"
    r"|(?P<comprising>(?:further\s+)?(?:comprising|comprises|comprise|comprised\s+of))"
    r"|(?P<including>(?:further\s+)?(?:including|includes))"
    r"|(?P<wherein>wherein|whereby)"
    r"|(?P<having>(?:further\s+)?having)"
    r"|(?P<containing>containing|contains))\b",
    re.IGNORECASE,
)
_WEAK = {"having", "containing"}
_CN_TRANSITION = re.compile(
    r"(?P<characterized>其特征在于|其特征是|其特征为)|(?P<comprising>包括有?|包含有?|含有)|(?P<consisting_of>由(?=[^,;。]{1,200}?组成))|(?P<wherein>其中)"
)
_MARKER = re.compile(r"[\n:;,][ \t]*(?P<m>\([a-z]\)|[a-z]\)|\((?:i|ii|iii|iv|v|vi|vii|viii|ix|x)\))[ \t]")
# Element separators by (Chinese, wrapped). Text laid out by a PDF breaks lines wherever the page is
# full: there only blank lines split.
_SPLIT = {
    (False, False): re.compile(r";|\n|:(?=\s)"),
    (True, False): re.compile(r";|\n|。|:"),
    (False, True): re.compile(r";|\n[ \t]*\n|:(?=\s)"),
    (True, True): re.compile(r";|\n[ \t]*\n|。|:"),
}
_CN_CLAUSE = re.compile(r",(?=\s*(?:所述|其中|以及|并且))")
_CONJ_ONLY = frozenset({"and", "or", "and/or", "then", "以及", "和", "及"})
_LEADING_CONJ = re.compile(r"(?:and|or|and/or)\s+", re.IGNORECASE)


_EN_WORDS = re.compile(r"[a-z]+")
_IN_A = re.compile(r"in\s+an?\s", re.IGNORECASE)
_ANY_LETTER = re.compile(r"[A-Za-z]")
_COLON_AFTER = re.compile(r"\s+(?:the\s+)?(?:following\s+)?(?:steps?|elements?|components?)?(?:\s+of)?\s*:")


@dataclass
class Structure:
    """Offsets (into the document) of a claim's parts."""

    category: str = "unknown"
    subject: str | None = None
    preamble: tuple[int, int] | None = None
    transition: tuple[int, int] | None = None
    transition_kind: str | None = None
    elements: list[tuple[int, int]] = field(default_factory=list)
    limitation: tuple[int, int] | None = None  # a dependent claim's addition: its transition to its end


@dataclass
class Part:
    """An element (offsets into the document) with the elements it holds."""

    start: int
    end: int
    parts: list[Part] = field(default_factory=list)


_GROUP_END = re.compile(r"(?:^|[\s;,])(?:and|or|and/or|以及|和|或)\s*$", re.IGNORECASE)


MAX_PART_DEPTH = 16  # element nesting deeper than this stays at this depth (the export must not nest per element)


def nest_elements(norm: str, elements: list[tuple[int, int]]) -> list[Part]:
    """The elements nested: one followed by a colon ("wherein the fan assembly comprises:") holds
    the elements after it; its group ends with the element joined by "and"/"or" ("…; and mounting
    hooks …"), or at the end of the claim. Groups opened below `MAX_PART_DEPTH` levels (a run of
    lines ending in colons, as in text swept into a claim) keep their elements at that depth:
    the nesting, and the export's JSON, stay bounded whatever the claim's length."""
    root = Part(-1, -1)
    stack = [root]
    unopened = 0  # groups a colon opened below MAX_PART_DEPTH, not on the stack
    prev_end = None
    for a, b in elements:
        node = Part(a, b)
        stack[-1].parts.append(node)
        gap = norm[prev_end:a] if prev_end is not None else ""
        closes = len(stack) > 1 and prev_end is not None and bool(_GROUP_END.search(gap.strip(" \t\n;,，；")))
        after = norm[b : b + 3].lstrip(" \t")
        if after.startswith(":"):
            if len(stack) < MAX_PART_DEPTH:
                stack.append(node)
            else:
                unopened += 1
        elif closes:
            if unopened:
                unopened -= 1
            else:
                stack.pop()
        prev_end = b
    return root.parts


def _masked(norm: str, start: int, end: int, refs: list[tuple[int, int]]) -> str:
    """norm[start:end] with the reference phrases blanked (same length)."""
    seg = norm[start:end]
    if not refs:
        return seg
    chars = list(seg)
    for a, b in refs:
        for i in range(max(a, start), min(b, end)):
            chars[i - start] = " "
    return "".join(chars)


def category_of(subject_text: str, zh: bool) -> str:
    """Category from the subject noun phrase of a preamble."""
    s = subject_text.strip()
    if not s:
        return "unknown"
    if zh:
        best = None
        for word, cat in _CN_CATEGORY:
            i = s.rfind(word)
            if i >= 0:
                key = (i + len(word), len(word))
                if best is None or key > best[0]:
                    best = (key, cat)
        return best[1] if best else "apparatus"
    words = _EN_WORDS.findall(s.lower())
    head = [w for w in words if w not in ("a", "an", "the", "said")]
    if head and head[0] in ("use", "uses"):
        return "use"
    cat = None
    for w in words:
        c = _EN_CATEGORY_WORDS.get(w)
        if c and c != "use":
            cat = c
    if ("readable" in words or "program product" in " ".join(words)) and cat in (None, "apparatus"):
        cat = "medium"
    return cat or "apparatus"


def _subject(masked: str, zh: bool) -> str:
    s = masked.lstrip(" \t\n")
    if zh:
        s = s.lstrip("的 ")
        m = _CN_SUBJECT_STOP.search(s)
        return (s[: m.start()] if m else s[:40]).strip()
    if _IN_A.match(s) and "," in s:
        after = s[s.index(",") + 1 :].strip()
        if _ANY_LETTER.search(after):
            s = after
        else:
            s = s[3:]
    m = _EN_SUBJECT_STOP.search(s)
    sub = s[: m.start()] if m else s[:120]
    return " ".join(sub.split()[:8])


def analyse_structure(
    norm: str, body_start: int, end: int, refs: list[tuple[int, int]], zh: bool, dependent: bool,
    wrapped: bool = False,
) -> Structure:
    """Category, preamble, transition and elements of the claim body norm[body_start:end].

    `wrapped`: the text's line breaks are layout (PDF), not structure."""
    st = Structure()
    if body_start >= end:
        return st
    pattern = _CN_TRANSITION if zh else _EN_TRANSITION
    chosen = None
    first_strong = first_any = None
    search_from = refs[0][1] if (dependent and refs) else body_start
    colon_wanted = not dependent and not zh
    for m in pattern.finditer(norm, search_from, end):
        if refs and any(m.start() < b and a < m.end() for a, b in refs):
            continue
        if first_any is None:
            first_any = m
        if m.lastgroup in _WEAK:
            continue
        if first_strong is None:
            first_strong = m
            if not colon_wanted:
                break
        after = norm[m.end() : m.end() + 60]
        if after.lstrip(" \t").startswith(":") or _COLON_AFTER.match(after):
            chosen = m
            break
        if m.start() - body_start > 1500:
            break
    chosen = chosen or first_strong or first_any
    masked = _masked(norm, body_start, chosen.start() if chosen else min(end, body_start + 200), refs)
    subject = _subject(masked, zh)
    st.subject = subject or None
    st.category = category_of(subject, zh)
    if chosen is None:
        a, b = trim(norm, body_start, end, chars=".;。；")
        if a < b:
            st.elements = [(a, b)]
        if dependent and refs:
            la, lb = trim(norm, max(body_start, refs[-1][1]), end, chars=",，.;。；")
            st.limitation = (la, lb) if la < lb else None
        return st
    pa, pb = trim(norm, body_start, chosen.start(), chars=",，")
    if pa < pb:
        st.preamble = (pa, pb)
    ta, tb = chosen.start(), chosen.end()
    st.transition = (ta, tb)
    st.transition_kind = chosen.lastgroup
    st.elements = split_elements(norm, tb, end, zh, wrapped)
    if dependent:
        la, lb = trim(norm, ta, end, chars=".;。；")
        st.limitation = (la, lb) if la < lb else None
    return st


def split_elements(norm: str, start: int, end: int, zh: bool, wrapped: bool = False) -> list[tuple[int, int]]:
    """Body elements of norm[start:end] as trimmed (start, end) pairs."""
    cuts = [start]
    for m in _SPLIT[bool(zh), bool(wrapped)].finditer(norm, start, end):
        cuts.append(m.start())
        cuts.append(m.end())
    if zh and norm.find(";", start, end) < 0:
        # no "；" between elements: a clause that starts with "所述" / "其中" / "以及" starts an element
        for m in _CN_CLAUSE.finditer(norm, start, end):
            cuts.append(m.start())
            cuts.append(m.end())
    if not zh and norm.find(")", start, end) >= 0:
        for m in _MARKER.finditer(norm, start - 1 if start > 0 else start, end):
            cuts.append(m.start("m"))
            cuts.append(m.start("m"))
    cuts.append(end)
    cuts.sort()
    out: list[tuple[int, int]] = []
    for i in range(0, len(cuts) - 1):
        a, b = cuts[i], cuts[i + 1]
        if b <= a:
            continue
        if not norm[a:b].strip(";:。 \t\n"):
            continue
        a, b = trim(norm, a, b, chars=",.;:，。；：")
        if a >= b:
            continue
        if b - a <= 7 and norm[a:b].lower() in _CONJ_ONLY:
            continue
        if norm[a] in "aoAO":
            m = _LEADING_CONJ.match(norm, a, b)
            if m and m.end() < b:
                a = m.end()
        out.append((a, b))
    # merge duplicates produced by overlapping cuts
    dedup: list[tuple[int, int]] = []
    for a, b in out:
        if dedup and a < dedup[-1][1]:
            continue
        dedup.append((a, b))
    return dedup
