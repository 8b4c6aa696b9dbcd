"""The redline inside an aligned pair: word-level in both languages (Chinese cut into words by
`pipelines.text.segment`, so 城镇居民 / 农村居民 change as units), with offsets into both original texts.

Tokens are compared in normalised form (NFKC: full-width to half-width; whitespace between tokens
ignored), but every op carries the original offsets, so the ops partition both clause spans:
`equal` (same text), `format` (same tokens, different spacing or width), `renumber` (the clause's own
number label), `replace`, `insert`, `delete`. Applying the ops (equal: A's text; anything else:
B's text) rebuilds B's clause exactly — and with the separators between clauses, B's whole text
(`apply_changes`). difflib runs with autojunk=False: repeated legal boilerplate is not junk.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from difflib import SequenceMatcher

from pipelines.text.script import HAN
from pipelines.text.segment import han_words

RE_TOKEN_EN = re.compile(r"\w+|[^\w\s]", re.UNICODE)
RE_TOKEN_ZH = re.compile(r"[A-Za-z0-9\uff10-\uff19\uff21-\uff3a\uff41-\uff5a]+(?:[.,][0-9]+)*|[^\s]", re.UNICODE)
HAN_RUN_RE_1 = re.compile(f"[{HAN}]")
RE_TOKEN_ZH_WORDS = re.compile(rf"[{HAN}]+|[A-Za-z0-9\uff10-\uff19\uff21-\uff3a\uff41-\uff5a]+(?:[.,][0-9]+)*|[^\s]",
                               re.UNICODE)


@dataclass(frozen=True)
class Token:
    """A token of the text `tokenize` was given: offsets into it, and the token's NFKC form (what
    the diff compares). Plain offsets, not a `Span`: tokens index a clause's text, Chinese ones per
    word or per character."""

    norm: str
    start: int
    end: int


@dataclass(frozen=True)
class Op:
    """One redline op over [a_start, a_end) of version A's text and [b_start, b_end) of version B's
    (absolute offsets into the two documents, so not one `Span`)."""

    op: str  # equal | format | renumber | replace | insert | delete
    a_start: int
    a_end: int
    b_start: int
    b_end: int


def tokenize(text: str, start: int, end: int, lang: str, words: bool = False) -> list[Token]:
    """Tokens of text[start:end]: English words and punctuation; Chinese per character, or with
    `words` per word (Han runs segmented), Latin and digit runs whole."""
    if lang == "zh" and words:
        out = []
        for m in RE_TOKEN_ZH_WORDS.finditer(text, start, end):
            if HAN_RUN_RE_1.match(m.group(0)):
                out += [Token(text[s:e], s, e) for s, e in han_words(text, m.start(), m.end())]
            else:
                out.append(Token(unicodedata.normalize("NFKC", m.group(0)), m.start(), m.end()))
        return out
    rx = RE_TOKEN_ZH if lang == "zh" else RE_TOKEN_EN
    return [Token(unicodedata.normalize("NFKC", m.group(0)), m.start(), m.end()) for m in rx.finditer(text, start, end)]


def body_tokens(text: str, start: int, end: int, label: tuple[int, int] | None, lang: str) -> list[Token]:
    """Tokens of a clause without its own number label."""
    if label is None:
        return tokenize(text, start, end, lang)
    return tokenize(text, start, label[0], lang) + tokenize(text, label[1], end, lang)


def same_tokens(a_text: str, a: tuple[int, int, tuple[int, int] | None], b_text: str,
                b: tuple[int, int, tuple[int, int] | None], lang: str) -> bool:
    """Whether two clause bodies have the same normalised tokens (the clause is not edited)."""
    ta = [t.norm for t in body_tokens(a_text, a[0], a[1], a[2], lang)]
    tb = [t.norm for t in body_tokens(b_text, b[0], b[1], b[2], lang)]
    return ta == tb


def diff_spans(a_text: str, a_span: tuple[int, int], a_label: tuple[int, int] | None,
               b_text: str, b_span: tuple[int, int], b_label: tuple[int, int] | None, lang: str) -> list[Op]:
    """Ops that partition A's clause span and B's clause span."""
    ops: list[Op] = []
    a0, a1 = a_span
    b0, b1 = b_span
    if a_label is not None and b_label is not None and a_label[0] == a0 and b_label[0] == b0:
        kind = "equal" if a_text[a0:a_label[1]] == b_text[b0:b_label[1]] else "renumber"
        ops.append(Op(kind, a0, a_label[1], b0, b_label[1]))
        a0, b0 = a_label[1], b_label[1]
    ta = tokenize(a_text, a0, a1, lang, words=True)
    tb = tokenize(b_text, b0, b1, lang, words=True)

    sm = SequenceMatcher(None, [t.norm for t in ta], [t.norm for t in tb], autojunk=False)
    # token-exact spans; the whitespace between ops goes to the neighbouring equal op (or the earlier op),
    # so a changed op covers just its words while the ops still partition both clause spans
    raw: list[list] = []
    pa, pb = a0, b0
    for tag, i1, i2, j1, j2 in sm.get_opcodes():
        sa = ta[i1].start if i1 < i2 else None
        sb = tb[j1].start if j1 < j2 else None
        if not raw and tag != "equal" and ((sa or pa) > pa or (sb or pb) > pb):
            raw.append(["equal", pa, sa or pa, pb, sb or pb])  # the space after the number label
            pa, pb = sa or pa, sb or pb
        elif raw and tag != "equal":
            if sa is not None and sa > pa:
                raw[-1][2] = sa
                pa = sa
            if sb is not None and sb > pb:
                raw[-1][4] = sb
                pb = sb
        ea = ta[i2 - 1].end if i1 < i2 else pa
        eb = tb[j2 - 1].end if j1 < j2 else pb
        raw.append([tag, pa, ea, pb, eb])
        pa, pb = ea, eb
    if raw:
        raw[-1][2], raw[-1][4] = a1, b1
    for tag, s_a, e_a, s_b, e_b in raw:
        if tag == "equal":
            tag = "equal" if a_text[s_a:e_a] == b_text[s_b:e_b] else "format"
        if s_a == e_a and s_b == e_b:
            continue
        ops.append(Op(tag, s_a, e_a, s_b, e_b))
    if not ta and not tb and (a0 < a1 or b0 < b1):
        ops.append(Op("equal" if a_text[a0:a1] == b_text[b0:b1] else "format", a0, a1, b0, b1))
    return _merge_small(ops, a_text, b_text)


def _merge_small(ops: list[Op], a_text: str, b_text: str) -> list[Op]:
    """Readable redline: a tiny equal run (<= 2 characters, e.g. one shared Chinese character)
    between two changes is folded into one replace; neighbouring changes are joined."""
    changed = {"replace", "insert", "delete"}
    folded: list[Op] = []
    k = 0
    while k < len(ops):
        op = ops[k]
        if (op.op in {"equal", "format"} and folded and folded[-1].op in changed and k + 1 < len(ops)
                and ops[k + 1].op in changed and len(a_text[op.a_start:op.a_end].strip()) <= 2):
            folded.append(Op("replace", op.a_start, op.a_end, op.b_start, op.b_end))
        else:
            folded.append(op)
        k += 1
    out: list[Op] = []
    for op in folded:
        if out and out[-1].op in changed and op.op in changed and out[-1].a_end == op.a_start and out[-1].b_end == op.b_start:
            p = out[-1]
            out[-1] = Op("replace" if (p.op != op.op or p.op == "replace") else p.op, p.a_start, op.a_end, p.b_start, op.b_end)
        else:
            out.append(op)
    return out


def rebuild_b(ops: list[Op], a_text: str, b_text: str) -> str:
    """B's clause text from the ops: equal ops from A, every other op from B."""
    return "".join(a_text[o.a_start:o.a_end] if o.op == "equal" else b_text[o.b_start:o.b_end] for o in ops)
