"""Splitting a claims section into claims.

Candidates are claim numbers that begin a line ("1.", "1 .", "1、", "１．", "Claim 1", "[Claim 1]",
"3-5. (Canceled)", "2.-4. (Cancelled)") or follow the end of a sentence in the same line. Each
gets a quality from its context: line start, what precedes it (a full stop or a closing status
marker reads like the end of the previous claim; ";", ":" or "," like an item of a list inside a
claim) and what follows (a capital, a CJK character or a status marker reads like a claim).
The claims are then chosen in sequence: the next claim is the best candidate carrying the
expected next number before the first strong candidate with a higher number; a gap in the
numbering is accepted only at a strong candidate. So "1. a housing; 2. a lid" inside claim 1 does
not start claims 1 and 2, but "2. The device of claim 1" on the next line does.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, field

from pipelines.text.script import is_han

_STATUS_START = r"(?:cancell?ed|original|new|withdrawn|currently|previously|presently|amended|not\s+entered)"
_CANDIDATE = re.compile(
    r"(?P<tok>"
    r"\[\s*claims?\s+(?P<a>\d{1,4})(?:\s*(?:-|~|to|through)\s*(?P<a2>\d{1,4}))?\s*\]\s*[.:]?"
    r"|(?<![A-Za-z])claims?\s+(?P<b>\d{1,4})(?:\s*(?:-|~|to|through)\s*(?P<b2>\d{1,4}))?\s*[.:]?"
    r"|(?<![\d.,])(?P<c>\d{1,4})\s?\.?\s*(?:-|~|to|through)\s*(?P<c2>\d{1,4})(?:\s?[.、]|(?=[ \t]*\(" + _STATUS_START + r"))"
    r"|(?<![\d.,])(?P<d>\d{1,4})(?:\s?[.、](?!\d)|(?=[ \t]*\(" + _STATUS_START + r"))"
    r")",
    re.IGNORECASE,
)
# Where a claim number may begin: after a line break, a full stop or a closing marker (then the
# candidate itself is matched there; much cheaper than trying the candidate pattern everywhere).
_ANCHOR = re.compile(r"[\n.。;:)\]][ \t]*(?=[\[cC\d])")
_STATUS = re.compile(r"[ \t]*\(\s*(?P<s>[^()\n]{1,60}?)\s*\)[ \t]*[.:]?|[ \t]*(?P<bare>cancell?ed|deleted|删除)\b[ \t]*[.:]?", re.IGNORECASE)
_REFERENCE_HINT = re.compile(r"\bclaims?\s+\d|权\s*利\s*要\s*求|請\s*求\s*項|请\s*求\s*项", re.IGNORECASE)
_STATUS_WORDS = {
    "original", "currently amended", "previously presented", "canceled", "withdrawn", "new",
    "previously amended", "presently amended", "amended", "not entered", "rejected", "allowed",
    "objected to", "deleted", "reinstated", "pending", "active",
}
_STATUS_ALIASES = {"cancelled": "canceled", "deleted": "canceled", "删除": "canceled", "new claim": "new"}


def normalise_status(raw: str) -> str | None:
    """'Currently  Amended' -> 'currently amended'; 'Withdrawn – Currently Amended' -> 'withdrawn -
    currently amended'; 'Cancelled' -> 'canceled'. None when `raw` is not a prosecution status."""
    s = re.sub(r"\s+", " ", raw.strip().lower())
    parts = [p.strip() for p in re.split(r"\s*[-/,;]\s*|\s+and\s+", s) if p.strip()]
    if not parts:
        return None
    out = []
    for p in parts:
        p = _STATUS_ALIASES.get(p, p)
        if p not in _STATUS_WORDS:
            return None
        out.append(p)
    return " - ".join(out)


@dataclass
class RawClaim:
    """One claim (or a range of cancelled claims) as cut from the section; offsets into the
    normalised text (`patents.text.normalise`, same length as `Document.text`)."""

    numbers: list[int]
    start: int  # first character of the number token
    end: int  # end of the claim's text (trimmed)
    body_start: int  # after number and status marker
    number_end: int
    status: str = "active"
    status_start: int | None = None
    status_end: int | None = None
    warnings: list[str] = field(default_factory=list)


@dataclass
class _Cand:
    """A possible claim start while splitting: offsets into the normalised text."""

    pos: int
    tok_end: int
    first: int
    last: int
    quality: int
    status: str | None
    status_span: tuple[int, int] | None
    body_start: int


def _candidates(norm: str, start: int, end: int) -> list[_Cand]:
    out: list[_Cand] = []
    anchors = [start]
    anchors.extend(a.end() for a in _ANCHOR.finditer(norm, start, end))
    last_pos = -1
    for anchor in anchors:
        p0 = anchor
        while p0 < end and norm[p0] in " \t":
            p0 += 1
        m = _CANDIDATE.match(norm, p0, end)
        if m is None or m.start("tok") <= last_pos:
            continue
        pos = m.start("tok")
        last_pos = pos
        # allowed where a line starts, or within two spaces after the end of a sentence or marker
        q = pos - 1
        while q >= start and norm[q] in " \t":
            q -= 1
        if q >= start and norm[q] != "\n" and not (norm[q] in ".。;:)]" and pos - 1 - q <= 2):
            continue
        groups = m.groupdict()
        n_first = groups["a"] or groups["b"] or groups["c"] or groups["d"]
        n_last = groups["a2"] or groups["b2"] or groups["c2"] or n_first
        first, last = int(n_first), int(n_last)
        if first == 0 or last < first or last - first > 500:
            continue
        tok_end = m.end("tok")
        status = None
        status_span = None
        body_start = tok_end
        sm = _STATUS.match(norm, tok_end, end)
        if sm:
            raw = sm.group("s") or sm.group("bare")
            st = normalise_status(raw)
            if st is not None:
                status = st
                g = "s" if sm.group("s") else "bare"
                status_span = (sm.start(g), sm.end(g))
                body_start = sm.end()
        is_range = last != first
        explicit = pos < len(norm) and norm[pos] in "[cC"
        if is_range and status is None:
            continue  # "1-3." only numbers a range of claims with a status: "3-5. (Canceled)"
        if explicit and norm[pos] in "cC" and norm[pos:pos + 6].lower() == "claims" and not is_range:
            continue  # "Claims 2" is a reference, not a claim start
        # quality from the context
        line_start = _line_head(norm, start, pos) == pos
        q = 2 if line_start else 0
        p = pos - 1
        while p >= start and norm[p].isspace():
            p -= 1
        prev = norm[p] if p >= start else ""
        if not prev or prev in ".。)]!?\"'":
            q += 2
        elif prev in ";:,":
            q -= 3
        else:
            q -= 2
        b = body_start
        while b < end and norm[b] in " \t:.-":
            b += 1
        nxt = norm[b] if b < end else ""
        if explicit and status is None and norm[pos] in "cC" and norm[tok_end - 1] not in ".:" and (
            not nxt or nxt.islower() or nxt in ",;"
        ):
            continue  # "claim 1, wherein" after a line break is a reference, not a claim
        if status is not None or explicit:
            q += 1
        elif nxt and (nxt.isupper() or nxt in "(\"'[" or is_han(nxt)):
            q += 1
        elif nxt and nxt.islower():
            q -= 1
        hint_end = norm.find("\n", b, min(end, b + 150))
        if _REFERENCE_HINT.search(norm, b, hint_end if hint_end >= 0 else min(end, b + 150)):
            q += 2  # a claim that refers to another claim: list items rarely do
        out.append(_Cand(pos, tok_end, first, last, q, status, status_span, body_start))
    return out


def _line_head(norm: str, start: int, pos: int) -> int:
    """Offset of the first non-blank character of the line holding pos."""
    nl = norm.rfind("\n", start, pos)
    h = nl + 1 if nl >= 0 else start
    while h < pos and norm[h] in " \t":
        h += 1
    return h


STRONG = 4  # a candidate this good bounds the search for the expected number
MIN_QUALITY = 1  # below this a candidate is an item inside a claim, never a claim


def split_claims(norm: str, start: int, end: int) -> list[RawClaim]:
    """The claims of norm[start:end], in order (see the module docstring)."""
    cands = _candidates(norm, start, end)
    if not cands:
        return []
    chosen: list[_Cand] = []
    # The first claim: the first candidate that is strong, or the very first one.
    i0 = next((i for i, c in enumerate(cands) if c.quality >= STRONG), 0)
    if cands[0].pos == _first_text(norm, start, end):
        i0 = 0
    chosen.append(cands[i0])
    idx = i0 + 1
    n = len(cands)
    by_number: dict[int, list[int]] = {}
    for j, c in enumerate(cands):
        if c.quality >= MIN_QUALITY:
            by_number.setdefault(c.first, []).append(j)
    strong = [j for j, c in enumerate(cands) if c.quality >= STRONG]
    while idx < n:
        expected = chosen[-1].last + 1
        # the first strong candidate with a higher number bounds the search
        p = bisect.bisect_left(strong, idx)
        while p < len(strong) and cands[strong[p]].first <= expected:
            p += 1
        stop = strong[p] if p < len(strong) else n
        same = by_number.get(expected, [])
        lo = bisect.bisect_left(same, idx)
        hi = bisect.bisect_left(same, stop)
        window = same[lo:hi]
        if window:
            best = max(window, key=lambda j: (cands[j].quality, -j))
            chosen.append(cands[best])
            idx = best + 1
        elif stop < n and cands[stop].first < expected + 50:
            chosen.append(cands[stop])
            idx = stop + 1
        else:
            break
    claims: list[RawClaim] = []
    for k, c in enumerate(chosen):
        nxt = chosen[k + 1].pos if k + 1 < len(chosen) else end
        e = nxt
        while e > c.body_start and norm[e - 1].isspace():
            e -= 1
        body = c.body_start
        while body < e and norm[body] in " \t.:-\n":
            body += 1
        rc = RawClaim(
            numbers=list(range(c.first, c.last + 1)),
            start=c.pos,
            end=max(e, c.tok_end),
            body_start=body,
            number_end=c.tok_end,
            status=c.status or "active",
            status_start=c.status_span[0] if c.status_span else None,
            status_end=c.status_span[1] if c.status_span else None,
        )
        claims.append(rc)
    return claims


def _first_text(norm: str, start: int, end: int) -> int:
    p = start
    while p < end and norm[p].isspace():
        p += 1
    return p
