"""Antecedent basis: "the X" / "said X" (所述X) with no earlier mention of X in the claim or its
chain of parents.

Deliberately conservative, to keep noise out of a reviewer's list: the head of the noun phrase
after "the"/"said" (its last word before a preposition, verb or punctuation, singular form) is
looked for among all words that came before it in the claim and in the whole text of every
ancestor claim, with or without an article. Phrases the idiom allows without antecedent ("the
same", "the group consisting of", "the steps of", "the art") are skipped, as are noun phrases
that run into "and"/"or" ("the first and second housing portions") or end on an ordinal or a
number. Reference numerals "(10)" and reference phrases are ignored. Chinese: "所述X" is flagged
only when not even the first two characters of X occur earlier.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_WORD = re.compile(r"[A-Za-z][A-Za-z\-]*")
_STOP = frozenset(
    """a an the said of for to in on at by with from into onto over under between among within without through
    via per as and or nor but than that which who whom whose where when while wherein whereby whereof thereof
    therein thereto thereby is are was were be been being has have had having do does did can could may might
    must shall should will would comprising comprises comprise comprised including includes include consisting
    consists containing contains characterized characterised such each further configured adapted arranged
    operable capable so not also only both either neither about around after before during upon against along
    across behind beyond toward towards up down out off if then thus i ii iii this these those its their his her
    our any all some""".split()
)
_IDIOMS = frozenset(
    """same other others former latter art group steps step following above below foregoing preceding
    invention claim claims rest remainder total sum end ends one ones case way manner extent purpose course basis
    form presence absence use order time times number amount value values range ranges like type types respective
    user operator person patient ground air atmosphere environment earth world outside inside interior exterior
    front back top bottom left right side sides center centre middle surface edge plurality majority entirety whole result method process apparatus device
    system composition medium help aid art position positions direction directions level levels quality vicinity
    shape size length width height thickness weight temperature pressure speed velocity""".split()
)
_VERBISH = frozenset(
    """according based using relative together since provide provides provided receive receives contributes
    contribute set defined extending located disposed positioned mounted connected coupled attached formed made
    selected used thereon therefrom therewith until unless whether because being where""".split()
)
_ORDINALS = frozenset("first second third fourth fifth sixth seventh eighth ninth tenth last next other".split())
_NP_TOKEN = re.compile(r"[A-Za-z][A-Za-z\-]*|\(\s*\d+[a-z']?\s*\)|\S")
_DEFINITE = re.compile(r"\b(?:the|said)\s+", re.IGNORECASE)


def singular(w: str) -> str:
    """A crude singular form of an English noun, good enough to match plural and singular heads."""
    w = w.lower()
    if len(w) > 4 and w.endswith("ies"):
        return w[:-3] + "y"
    if len(w) > 4 and w.endswith(("sses", "xes", "ches", "shes", "zes")):
        return w[:-2]
    if len(w) > 3 and w.endswith("s") and not w.endswith(("ss", "us", "is")):
        return w[:-1]
    return w


@dataclass(frozen=True)
class Missing:
    """A definite noun phrase [start, end) whose head `head` has no antecedent."""

    start: int
    end: int
    head: str


def _add_words(seen: set[str], text: str) -> None:
    for w in _WORD.findall(text):
        w = singular(w)
        seen.add(w)
        if "-" in w:
            seen.update(singular(p) for p in w.split("-") if p)


def words_of(text: str) -> set[str]:
    """Every word of `text` (and every part of a hyphenated word), lower-cased and singular."""
    seen: set[str] = set()
    _add_words(seen, text)
    return seen


def check_english(
    norm: str, start: int, end: int, skip: list[tuple[int, int]], inherited: set[str], inherited_text: str = ""
) -> list[Missing]:
    """Definite noun phrases in norm[start:end] without antecedent (see the module docstring).

    `skip`: ranges (reference phrases) to ignore; `inherited`: words of the ancestor claims,
    `inherited_text` their text (to look for "a second X" when the claim says "the second X").
    """
    seg = norm[start:end]
    seen: set[str] = set()
    out: list[Missing] = []
    last = 0
    for m in _DEFINITE.finditer(seg):
        s = m.start()
        if any(a <= start + s < b for a, b in skip):
            continue
        # words before this phrase join the seen set
        _add_words(seen, seg[last:s])
        last = s
        pos = m.end()
        np_words: list[tuple[str, int]] = []
        terminator = ""
        toks = [(wm.group(), wm.end()) for wm in _NP_TOKEN.finditer(seg, pos, min(len(seg), pos + 120))][:8]
        for k, (tok, tok_end) in enumerate(toks):
            low = tok.lower()
            if not tok[0].isalpha():
                terminator = tok
                break
            if low in _STOP or low in _VERBISH:
                terminator = low
                break
            if np_words and low.endswith(("ing", "ed")):
                nxt = toks[k + 1][0].lower() if k + 1 < len(toks) else ""
                if not nxt or not nxt[0].isalpha() or nxt in _STOP:
                    terminator = low  # a verb: "the valve being", "the milk collected in"
                    break
            np_words.append((tok, tok_end))
            if len(np_words) >= 5:
                break
        if not np_words or terminator in ("and", "or", "/"):
            continue
        if any(len(w) > 4 and w.lower().endswith("ly") for w, _ in np_words):
            continue
        if len(np_words) == 1 and np_words[0][0].lower().endswith(("ing", "ed")):
            continue
        first = np_words[0][0].lower()
        content = [w for w, _ in np_words if w.lower() not in _ORDINALS]
        head, head_end = np_words[-1]
        h = singular(head)
        if first in _IDIOMS or h in _IDIOMS or not content or len(h) < 3 or head.isupper():
            continue
        heads = {singular(w) for w in content}
        if first in _ORDINALS and first not in ("last", "next", "other") and len(np_words) > 1:
            # "the second lid" needs "second ... lid" earlier, not just "a first lid"
            if _has_ordinal_phrase(first, h, seg[:s]) or _has_ordinal_phrase(first, h, inherited_text):
                continue
            out.append(Missing(start + s, start + head_end, f"{first} {h}"))
            continue
        if heads & seen or heads & inherited:
            continue
        if any(part in seen or part in inherited for w in heads for part in w.split("-") if len(part) > 2):
            continue  # "the sole-plate" after "a sole"
        out.append(Missing(start + s, start + head_end, h))
        seen.add(h)  # flag each missing head once per claim
    return out


_WS = re.compile(r"\s+")
def _has_ordinal_phrase(ordinal: str, head: str, text: str) -> bool:
    """True when `text` has the ordinal followed within four words by the head (either number)."""
    if not text:
        return False
    stem = re.escape(head[:-1] if head.endswith("y") else head)
    pat = rf"\b{ordinal}\b(?:[\s-]+[A-Za-z-]+){{0,3}}?[\s-]+{stem}(?:s|es|y|ies)?\b"
    return re.search(pat, text, re.IGNORECASE) is not None


_CN_TERM_STOP = re.compile(r"[的在与和及上中内为是对将,;:。()、\s\d]|进行|包括|设置|固定|连接|通过")


def check_chinese(norm: str, start: int, end: int, skip: list[tuple[int, int]], inherited_text: str) -> list[Missing]:
    """"所述X" in norm[start:end] where even X's first two characters occur nowhere earlier.

    `inherited_text`: the ancestors' text with whitespace removed (PDF lines break inside words)."""
    out: list[Missing] = []
    seg = norm[start:end]
    i = seg.find("所述")
    while i >= 0:
        abs_i = start + i
        if not any(a <= abs_i < b for a, b in skip):
            j = i + 2
            m = _CN_TERM_STOP.search(seg, j, min(len(seg), j + 16))
            term_end = m.start() if m else min(len(seg), j + 16)
            term = seg[j:term_end]
            if len(term) >= 2:
                probe = term[:2]
                earlier = _WS.sub("", seg[:i]).replace("所述", "")
                if probe not in earlier and probe not in inherited_text:
                    out.append(Missing(abs_i, start + term_end, term))
        i = seg.find("所述", i + 2)
    return out
