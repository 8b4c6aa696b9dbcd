"""Reference phrases inside a claim: which claims a claim refers to, with the referring words.

English: "claim 1", "claims 1 and 2", "claim 1 or 2", "claims 1, 3 or 5", "any one of claims 1 to
5", "any of claims 1-5", "claims 2 through 4", "claim 1 or claim 2", "as claimed in claim 1",
"any preceding claim", "any one of the preceding claims", "according to one or more of the
previous claims" (all earlier claims), "the preceding claim" (the one just before).
Chinese: "如权利要求1所述", "根据权利要求1或2所述", "如权利要求1至5中任一项所述", "权利要求1-3任一项",
"如权利要求2-4之一所述", "权利要求1~3", "前述任一项权利要求".
Only these phrases make dependencies. "claim 3 of U.S. Pat. No. ..." is kept as an `external`
reference that makes none.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_UNIT = r"(?!\s*(?:%|°|(?:mm|cm|nm|um|µm|m|km|kg|mg|g|ml|l|wt|vol|mol|degrees?|percent|times|seconds?|minutes?|hours?|days?)\b))"
_N = r"\d{1,4}(?!\d)(?!\.\d)"
_EN_SEP = r"(?:\s*,\s*(?:and/or\s+|and\s+|or\s+)?|\s+and/or\s+|\s+and\s+|\s*&\s*|\s+or\s+|\s*(?:-|~)\s*|\s+(?:to|through|thru)\s+)"
_EN_SEP_CLAIM = r"(?:(?:any\s+(?:one\s+)?of\s+|either\s+of\s+)?claims?\s+)?"
_LEAD = (
    r"(?:(?:as\s+(?:claimed|recited|defined|set\s+forth|described|specified|characteri[sz]ed|stated|disclosed)\s+in"
    r"|according\s+to|in\s+accordance\s+with|as\s+in)\s+)?"
)
_QUANT = (
    r"(?:(?:any|either|each|all|one|at\s+least\s+one)(?:\s+one)?(?:\s+or\s+more)?\s+of\s+(?:the\s+)?"
    r"(?:(?:preceding|previous|prior|foregoing|above)\s+)?)?"
)
# Fast path: the core "claim(s) N ..." starts with a literal; its lead-in is matched backwards.
_EN_CORE = re.compile(
    rf"claims?\s+(?P<nums>{_N}{_UNIT}(?:{_EN_SEP}{_EN_SEP_CLAIM}{_N}{_UNIT})*)\b", re.IGNORECASE
)
_EN_PREFIX = re.compile(rf"(?<![A-Za-z]){_LEAD}{_QUANT}\Z", re.IGNORECASE)
_PREFIX_WORDS = ("as ", "accord", "any", "either", "each", "all", "one")
_PRECEDING_WORDS = ("preced", "previous", "prior", "foregoing", "above", "earlier", "aforementioned")
_EN_ALL_PRECEDING = re.compile(
    rf"\b{_LEAD}(?:(?:any|either|each|all|one|a)(?:\s+one)?(?:\s+or\s+more)?\s+(?:of\s+)?(?:the\s+)?"
    r"(?:preceding|previous|prior|foregoing|above|aforementioned|above-mentioned|earlier)\s+claims?"
    r"|(?:the\s+)?(?:preceding|previous|foregoing|above)\s+claims|any\s+(?:one\s+)?claim\s+(?:above|hereinbefore|before))\b",
    re.IGNORECASE,
)
_EN_PRECEDING_ONE = re.compile(
    rf"\b{_LEAD}the\s+(?:immediately\s+)?(?:preceding|previous|prior|foregoing)\s+claim\b(?!s)", re.IGNORECASE
)
_EXTERNAL_AFTER = re.compile(
    r"\s+(?:of|in)\s+(?:(?:the|a|said|U\.?\s?S\.?|European|PCT|international|parent|co-?pending|related|prior|earlier|issued)\s+)*"
    r"(?:patent|application|pat\.|publication|serial|[A-Z]{2}\s*\d)",
    re.IGNORECASE,
)
_EN_TOKENS = re.compile(r"\d{1,4}|and/or|and|&|or|to|through|thru|-|~|,", re.IGNORECASE)

_CN_SEP = r"(?:\s*(?:,|、|或者|或|以及|和|及|与|與|至|到|-|~)\s*(?:第\s*)?(?:权\s*利\s*要\s*求\s*|請\s*求\s*項\s*|请\s*求\s*项\s*)?)"
_CN_NUMBERED = re.compile(
    r"(?P<lead>(?:如|根据|根據|按照|依据|依據|依照|按|基于|基於|使用|采用|採用|利用|用|由)?\s*)(?:前述|上述)?\s*"
    rf"(?:权\s*利\s*要\s*求(?:书)?|請\s*求\s*項|请\s*求\s*项|申\s*請\s*專\s*利\s*範\s*圍)\s*(?:第\s*)?(?P<nums>\d{{1,3}}(?:{_CN_SEP}\d{{1,3}})*)\s*(?:项|項)?"
    r"(?P<tail>\s*(?:中|所述)?\s*(?:的)?\s*(?:任意一项|任一项|任何一项|任意项|任一項|任一|之一|一项或多项|至少一项)(?:权利要求)?)?"
    r"(?P<end>\s*(?:中)?所(?:述|限定|记载|記載)(?:的)?|\s*に記載の)?"
)
_CN_TOKENS = re.compile(r"\d{1,4}|或者|以及|或|和|及|与|與|至|到|-|~|,|、")
_CN_ALL_PRECEDING = re.compile(
    r"(?:如|根据|按照|依据|依照|按)?\s*(?:前述|上述|前面|以上)(?:的)?\s*(?:任意一项|任一项|任一|各项|所有)?\s*权利要求"
    r"(?:\s*(?:中)?\s*(?:任意一项|任一项|任一|之一))?(?:\s*(?:中)?所(?:述|限定)(?:的)?)?"
)


@dataclass(frozen=True)
class Ref:
    """A reference phrase: [start, end) in the normalised text it was found in (`patents.text.normalise`
    keeps the length, so the offsets hold for `Document.text` too), the claims it names, and its kind.

    kind: single | alternative | conjunctive | range | all_preceding | preceding | external
    """

    start: int
    end: int
    claims: tuple[int, ...]
    kind: str


def _expand(tokens: list[str]) -> tuple[list[int], bool, bool, bool]:
    """Numbers named by a token list like ['1', ',', '3', 'or', '5'], ['1', 'to', '5'] or a mix
    (['1', 'and', '2', 'to', '3']: a range's start is the number just before "to"), each once and
    in ascending order; with flags (had 'and', had 'or', had a range)."""
    nums: list[int] = []
    has_and = has_or = has_range = False
    pending_range = False
    for t in tokens:
        tl = t.lower()
        if tl.isdigit():
            n = int(tl)
            if pending_range and nums:
                a = nums[-1]
                lo, hi = (a, n) if a <= n else (n, a)
                if hi - lo <= 500:
                    nums.extend(range(lo + 1, hi + 1) if a <= n else range(lo, hi))
                else:
                    nums.append(n)
                pending_range = False
            else:
                nums.append(n)
        elif tl in ("to", "through", "thru", "-", "~", "至", "到"):
            pending_range = True
            has_range = True
        elif tl in ("and", "&", "和", "及", "与", "與", "以及"):
            has_and = True
        elif tl in ("or", "and/or", "或", "或者"):
            has_or = True
    return sorted(set(nums)), has_and, has_or, has_range


def _kind(nums: list[int], has_and: bool, has_or: bool, has_range: bool, alternative_words: bool) -> str:
    if len(set(nums)) <= 1:
        return "single"
    if alternative_words or has_or:
        return "alternative"
    if has_and:
        return "conjunctive"
    if has_range:
        return "range"
    return "alternative"


def _overlaps(taken: list[tuple[int, int]], a: int, b: int) -> bool:
    return any(a < y and x < b for x, y in taken)


def _preceding(norm: str, start: int, end: int, number: int, refs: list[Ref], taken: list[tuple[int, int]]) -> None:
    """'any preceding claim' (all earlier claims) and 'the preceding claim' (the one before)."""
    for m in _EN_ALL_PRECEDING.finditer(norm, start, end):
        if not _overlaps(taken, m.start(), m.end()):
            refs.append(Ref(m.start(), m.end(), tuple(range(1, number)), "all_preceding"))
            taken.append((m.start(), m.end()))
    for m in _EN_PRECEDING_ONE.finditer(norm, start, end):
        if not _overlaps(taken, m.start(), m.end()):
            refs.append(Ref(m.start(), m.end(), (number - 1,) if number > 1 else (), "preceding"))
            taken.append((m.start(), m.end()))


def find_references(norm: str, start: int, end: int, number: int) -> list[Ref]:
    """Reference phrases in norm[start:end] of claim `number`, in text order."""
    refs: list[Ref] = []
    taken: list[tuple[int, int]] = []
    segment = norm[start:end]
    lower = segment.lower()
    if "claim" in lower:
        for m in _EN_CORE.finditer(norm, start, end):
            a, b = m.start(), m.end()
            if a > start and norm[a - 1].isalnum():
                continue  # "disclaim 1"
            window_start = max(start, a - 90)
            window = lower[window_start - start : a - start]
            if any(w in window for w in _PREFIX_WORDS):
                pm = _EN_PREFIX.search(norm, window_start, a)
                if pm and pm.start() < a:
                    a = pm.start()
            tokens = _EN_TOKENS.findall(m.group("nums"))
            nums, has_and, has_or, has_range = _expand(tokens)
            head = norm[a : m.start("nums")].lower()
            alt = "any" in head or "either" in head or "one" in head
            if _EXTERNAL_AFTER.match(norm, b, end):
                kind = "external"
            else:
                kind = _kind(nums, has_and, has_or, has_range, alt)
            refs.append(Ref(a, b, tuple(nums), kind))
            taken.append((a, b))
        if any(w in lower for w in _PRECEDING_WORDS):
            _preceding(norm, start, end, number, refs, taken)
    if "权" in segment or "求" in segment or "範" in segment:
        for m in _CN_NUMBERED.finditer(norm, start, end):
            a, b = m.start(), m.end()
            while a < b and norm[a].isspace():
                a += 1
            while b > a and norm[b - 1].isspace():
                b -= 1
            if _overlaps(taken, a, b):
                continue
            raw = m.group("nums")
            tokens = _CN_TOKENS.findall(raw)
            nums, has_and, has_or, has_range = _expand(tokens)
            alt = bool(m.group("tail"))
            refs.append(Ref(a, b, tuple(nums), _kind(nums, has_and, has_or, has_range, alt)))
            taken.append((a, b))
        for m in _CN_ALL_PRECEDING.finditer(norm, start, end):
            a, b = m.start(), m.end()
            if not _overlaps(taken, a, b):
                refs.append(Ref(a, b, tuple(range(1, number)), "all_preceding"))
                taken.append((a, b))
    refs.sort(key=lambda r: (r.start, r.end))
    return refs
