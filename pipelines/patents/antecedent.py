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

Two refinements look beyond the chain:
- a term borrowed from a claim outside the chain: "the housing cover" in a claim whose parents
  know a housing but no cover, while another claim (not an ancestor) introduces "a housing cover",
  is missing its basis even though its first word has one; the claims that introduce it are named
  (`Missing.introduced_in`), for a single-word term too;
- an inherent part: "the udder of the animal", where "the animal" has antecedent basis (or "of an
  animal" introduces it), is reported as such (`Missing.owner_end`), for a lower severity.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

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
_DEFINITE = re.compile(r"(?:the|said) +(?=([a-z]+)?)")  # run on `clean` text (letters and spaces)
_LETTERS_ONLY = str.maketrans({chr(i): " " for i in range(128) if not ("a" <= chr(i) <= "z")})
_ALPHA = re.compile(r"[a-z]+")


def singular(w: str) -> str:
    """A crude singular form of an English noun, good enough to match plural and singular heads."""
    got = _SINGULAR.get(w)
    if got is None:
        got = _SINGULAR[w] = _singular(w)
        if len(_SINGULAR) > 200_000:
            _SINGULAR.clear()
    return got


_SINGULAR: dict[str, str] = {}


def _singular(w: str) -> str:
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
    """A definite noun phrase [start, end) whose head `head` has no antecedent; offsets into the
    normalised text checked (`patents.text.normalise`, same length as `Document.text`)."""

    start: int
    end: int
    head: str
    introduced_in: tuple[int, ...] = ()  # claims outside the chain that introduce the term ("a housing cover")
    owner_end: int | None = None  # "the udder of the animal": where "of the animal" ends (an inherent part)


_OF_OWNER = re.compile(r" +of +(the|said|a|an|its|their|each) +")  # on `clean` text
_INTRODUCER_WORDS = frozenset("a an one least more several two three multiple".split())


class ClaimTexts:
    """The letters-only text (`letters_only`) of every live claim, to find the claims that
    introduce a term ("a housing cover", "an inlet")."""

    def __init__(self, texts: dict[int, str]) -> None:
        """`texts`: each claim's body; made letters-only on first use."""
        self.texts = texts
        self.clean: dict[int, str] = {}
        self.joined: str | None = None  # every claim's letters-only text, for counting a term
        self.introduced_by: dict[tuple[str, ...], frozenset[int]] = {}  # term -> the claims introducing it

    def _clean(self, n: int) -> str:
        got = self.clean.get(n)
        if got is None:
            got = self.clean[n] = letters_only(self.texts[n])
        return got

    def introducing(self, words: list[str], exclude: frozenset[int]) -> tuple[int, ...]:
        """Claims other than `exclude` that introduce the term `words` with an indefinite article
        or a count ("a housing cover", "a plastic housing cover", "a plurality of housing covers")."""
        stem = words[-1][: max(3, len(words[-1]) - 2)]
        key = " " + " ".join([*words[:-1], stem])  # where a word starts: the text never starts with one
        if self.joined is None:
            self.joined = "\n".join(self._clean(n) for n in self.texts)
        if self.joined.count(key) < 2:
            return ()  # the term occurs once in all the claims: here
        term = tuple(words)
        found = self.introduced_by.get(term)
        if found is None:
            last = "|".join(sorted(forms(words[-1])))
            body = "".join(re.escape(w) + " +" for w in words[:-1])
            pat = re.compile(rf"\b{body}(?:{last})\b")
            found = self.introduced_by[term] = frozenset(
                n for n in self.texts if key in self._clean(n) and _introduced(self._clean(n), pat)
            )
        return tuple(sorted(found - exclude))


def _introduced(clean: str, phrase: re.Pattern[str]) -> bool:
    """True when `phrase` occurs in `clean` after an introducing word ("a", "an", "one", "at least
    one", "a plurality of", "two" …), with at most two other words (adjectives) between."""
    for m in phrase.finditer(clean):
        before = clean[max(0, m.start() - 60) : m.start()].split()[-4:]
        for k in range(len(before) - 1, max(-1, len(before) - 4), -1):
            w = before[k]
            if w in _INTRODUCER_WORDS or (w == "of" and k > 0 and before[k - 1] in ("plurality", "pair", "set", "number")):
                return True
            if w in _STOP:
                break
    return False


def _np_words(low: str, clean: str, pos: int, limit: int = 6) -> list[tuple[str, int]]:
    """The words of the noun phrase starting at `pos` (offsets into `clean`, the letters-only
    copy of `low`) with their end offsets: up to `limit` words, ended by punctuation, a stop word
    or a verb-like word."""
    out: list[tuple[str, int]] = []
    prev_end = pos
    for m in _ALPHA.finditer(clean, pos, min(len(clean), pos + 90)):
        if out and low[prev_end : m.start()].strip(" -\n\t"):
            break
        w = m.group()
        if w in _STOP or w in _VERBISH:
            break
        out.append((w, m.end()))
        prev_end = m.end()
        if len(out) >= limit:
            break
    return out


def letters_only(text: str) -> str:
    """`text` lower-cased with everything but ASCII letters (and non-ASCII) turned into spaces."""
    return text.lower().translate(_LETTERS_ONLY)


def words_of(text: str) -> set[str]:
    """Every word of `text`, lower-cased (parts of hyphenated words as words of their own)."""
    return set(_ALPHA.findall(text.lower()))


def forms(word: str) -> set[str]:
    """The word in both numbers: 'valve' -> {'valve', 'valves'}, 'bodies' -> {'body', 'bodies', ...}."""
    w = word.lower()
    s = singular(w)
    out = {w, s, s + "s", s + "es"}
    if s.endswith("y"):
        out.add(s[:-1] + "ies")
    return out


def check_english(
    norm: str,
    start: int,
    end: int,
    skip: list[tuple[int, int]],
    inherited: list[set[str]] | None = None,
    inherited_text: Callable[[], str] | None = None,
    texts: ClaimTexts | None = None,
    chain: frozenset[int] = frozenset(),
) -> list[Missing]:
    """Definite noun phrases in norm[start:end] without antecedent (see the module docstring).

    `skip`: ranges (reference phrases) to ignore; `inherited`: the word sets of the ancestor
    claims (`words_of`); `inherited_text`: gives their text as `letters_only` (to look for "a
    second X" when the claim says "the second X"), called only when needed; `texts`: every claim's
    text, to name the claims outside `chain` (the claim and its ancestors) that introduce a term.
    """
    sets = inherited or []
    seg = norm[start:end]
    low = seg.lower()
    clean = low.translate(_LETTERS_ONLY)  # same length: anything but a-z (and non-ASCII) -> space
    seen: set[str] = set()  # the words before the current phrase
    fed = 0
    flagged: set[str] = set()
    out: list[Missing] = []
    inherited_union: set[str] = set().union(*sets) if sets else set()

    def known(word: str) -> bool:
        f = forms(word)
        return not f.isdisjoint(seen) or not f.isdisjoint(inherited_union)

    def borrowed(s: int, pos: int) -> Missing | None:
        """A phrase whose first word has a basis but whose later word is known only from a claim
        outside the chain that introduces the whole term ("the housing cover")."""
        if texts is None:
            return None
        for w in clean[pos : pos + 48].split()[1:4]:
            if w in _STOP or w in _VERBISH:
                return None  # the phrase ends before an unknown word
            if len(w) > 2 and w not in seen and w not in inherited_union:
                sw = singular(w)
                if sw not in seen and sw not in inherited_union and sw + "s" not in seen and sw + "s" not in inherited_union:
                    break
        else:
            return None  # the words after the first are known: nothing borrowed
        words = _np_words(low, clean, pos)
        for k in range(1, len(words)):
            w = words[k][0]
            if len(w) <= 2 or w in _ORDINALS or known(w):
                continue
            term = [x for x, _ in words[: k + 1]]
            intro = texts.introducing(term, chain)
            if not intro or singular(w) in flagged:
                return None
            flagged.add(singular(w))
            return Missing(start + s, start + words[k][1], " ".join(term[:-1] + [singular(w)]), intro)
        return None

    for m in _DEFINITE.finditer(clean):
        s = m.start()
        if s and clean[s - 1] != " ":
            continue  # "bathe", "breathe"
        if skip and any(a <= start + s < b for a, b in skip):
            continue
        seen.update(clean[fed:s].split())
        fed = s
        pos = m.end()
        # fast path: the first word after "the" is a content word met before -> it has a basis
        w1 = m.group(1)
        if not w1 or w1 in _IDIOMS:
            continue
        if w1 not in _ORDINALS and w1 not in _STOP and w1 not in _VERBISH:
            if w1 in seen or singular(w1) in seen or w1 in inherited_union or singular(w1) in inherited_union:
                hit = borrowed(s, pos)
                if hit:
                    out.append(hit)
                continue
        toks = _NP_TOKEN.findall(low, pos, pos + 70)
        np_words: list[str] = []
        terminator = ""
        for k, tok in enumerate(toks[:8]):
            if not tok[0].isalpha():
                terminator = tok
                break
            if tok in _STOP or tok in _VERBISH:
                terminator = tok
                break
            if np_words and tok.endswith(("ing", "ed")):
                nxt = toks[k + 1] if k + 1 < len(toks) else ""
                if not nxt or not nxt[0].isalpha() or nxt in _STOP:
                    terminator = tok  # a verb: "the valve being", "the milk collected in"
                    break
            np_words.append(tok)
            if len(np_words) >= 5:
                break
        if not np_words or terminator in ("and", "or", "/"):
            continue
        first = np_words[0]
        head = np_words[-1]
        if first in _IDIOMS or (len(np_words) == 1 and head.endswith(("ing", "ed"))):
            continue
        content = [w for w in np_words if w not in _ORDINALS]
        if not content:
            continue
        h = singular(head)
        if h in _IDIOMS or len(h) < 3 or any(len(w) > 4 and w.endswith("ly") for w in np_words):
            continue
        # where the head ends, and its original case (an acronym in capitals is not checked)
        head_end = pos
        for w in np_words:
            head_end = low.find(w, head_end) + len(w)
        if seg[head_end - len(head) : head_end].isupper():
            continue
        if first in _ORDINALS and first not in ("last", "next", "other") and len(np_words) > 1:
            # "the second lid" needs "second ... lid" earlier, not just "a first lid"
            if _has_ordinal_phrase(first, h, clean, s) or (
                inherited_text is not None
                and _has_ordinal_phrase(first, h, inherited_text())
            ):
                continue
            out.append(Missing(start + s, start + head_end, f"{first} {h}"))
            continue
        if h in flagged:
            continue
        variants: set[str] = set()
        for w in content:
            for part in w.split("-"):
                if len(part) > 2:
                    variants |= forms(part)
        if not variants.isdisjoint(seen) or not variants.isdisjoint(inherited_union):
            hit = borrowed(s, pos)
            if hit:
                out.append(hit)
            continue
        intro = texts.introducing([w for w in _ALPHA.findall(" ".join(content))], chain) if texts else ()
        owner_end = _owner_end(low, clean, head_end, known)
        out.append(Missing(start + s, start + head_end, h, intro, None if owner_end is None else start + owner_end))
        flagged.add(h)  # flag each missing head once per claim
    return out


def _owner_end(low: str, clean: str, head_end: int, known: Callable[[str], bool]) -> int | None:
    """For "the udder of the animal" (offsets into `clean`): where "of the animal" ends when the
    owner has antecedent basis ("the"/"said" and a known word) or is introduced there ("of an
    animal", "of its", "of each"); None when the phrase is not "the X of <owner>"."""
    m = _OF_OWNER.match(clean, head_end)
    if m is None:
        return None
    words = _np_words(low, clean, m.end(), 4)
    if not words:
        return None
    if m.group(1) in ("the", "said") and not any(known(w) for w, _ in words if w not in _ORDINALS and len(w) > 2):
        return None
    return words[-1][1]


_WS = re.compile(r"\s+")
def _has_ordinal_phrase(ordinal: str, head: str, text: str, end: int | None = None) -> bool:
    """True when text[:end] (letters-only, lower case) has the ordinal followed within four words
    by the head, in either number ("first and second housing portions" has "second ... portion")."""
    stem = head[:-1] if head.endswith("y") else head
    end = len(text) if end is None else end
    i = text.find(ordinal, 0, end)
    while i >= 0:
        if i == 0 or text[i - 1] == " ":
            j = i + len(ordinal)
            if j >= len(text) or text[j] == " ":
                following = text[j : min(end, j + 80)].split()[:4]
                if any(w.startswith(stem) and len(w) - len(stem) <= 3 for w in following):
                    return True
        i = text.find(ordinal, i + 1, end)
    return False


_CN_TERM_STOP = re.compile(r"[的在与和及上中内为是对将,;:。()、\s\d]|进行|包括|设置|固定|连接|通过")


_CN_INTRODUCERS = re.compile(r"(?:一种|一个|一对|一|若干|多个|至少一个|设有|设置有|包括|还包括|包含|具有|安装有|连接有|配置有)$")


def check_chinese(
    norm: str,
    start: int,
    end: int,
    skip: list[tuple[int, int]],
    inherited_text: str,
    outside: dict[int, str] | None = None,
) -> list[Missing]:
    """"所述X" in norm[start:end] where even X's first two characters occur nowhere earlier; or,
    when they do, where the whole term X (three characters or more) occurs nowhere in the claim or
    its chain but is introduced ("设有壳体盖", "一种壳体盖") in a claim of `outside` (claim number ->
    text with whitespace removed: the claims outside the chain), which are then named.

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
                elif outside and len(term) >= 3 and term not in earlier and term not in inherited_text:
                    intro = tuple(sorted(n for n, text in outside.items() if _introduces_cn(text, term)))
                    if intro:
                        out.append(Missing(abs_i, start + term_end, term, intro))
        i = seg.find("所述", i + 2)
    return out


def _introduces_cn(text: str, term: str) -> bool:
    """True when `text` has `term` right after an introducing word ("设有壳体盖"), not after 所述."""
    k = text.find(term)
    while k >= 0:
        if _CN_INTRODUCERS.search(text, max(0, k - 4), k):
            return True
        k = text.find(term, k + 1)
    return False
