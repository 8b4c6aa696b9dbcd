"""Candidate spans of a `Document` for attribution, and the answer's attention mapped onto them.

`sentence_spans(doc)` cuts the text at sentence ends (. ! ? and the CJK 。！？, followed by
whitespace or not for CJK) and at line breaks, whitespace trimmed. `attribute_answer` runs the
engine's `LLM.attribute` over prompt = prefix + document text + suffix with the candidate spans
shifted by the prefix's length, and returns the best spans as `AttributedSpan`s whose `source` is
the document's own `SourceSpan` (`doc.text[char_start:char_end] == source.text`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from pipelines.documents import Document, SourceSpan

_CUT = re.compile(r"(?<=[.!?])\s+|(?<=[。！？])|\n+")
_TRIMMED = re.compile(r"\S(?:[\s\S]*\S)?")  # a segment without its surrounding whitespace


@dataclass(frozen=True)
class AttributedSpan:
    """A span of the source document and the answer's attention on it: `score` is its share of the
    attention over all candidate spans (the shares sum to 1), `mass` the fraction of all the
    answer's attention (engine.attention.attribution)."""

    source: SourceSpan
    score: float
    mass: float

    def to_dict(self) -> dict:
        return {**self.source.model_dump(), "score": round(self.score, 4), "mass": round(self.mass, 6)}


def sentence_spans(doc: Document) -> list[tuple[int, int]]:
    """(start, end) of every non-empty sentence or line of `doc.text`, whitespace trimmed."""
    text = doc.text
    bounds = [0, *(x for m in _CUT.finditer(text) for x in m.span()), len(text)]
    found = (_TRIMMED.search(text, a, b) for a, b in zip(bounds[::2], bounds[1::2], strict=True))
    return [m.span() for m in found if m is not None]


def attribute_answer(llm, doc: Document, prefix: str, suffix: str, answer: str,
                     candidates: Sequence[tuple[int, int]] | None = None, top_k: int = 3) -> list[AttributedSpan]:
    """The `top_k` candidate spans of `doc` (default: its sentences) that the answer attends to
    most, best first, for the prompt prefix + doc.text + suffix."""
    return attribute_answers(llm, [(doc, prefix, suffix, answer, candidates)], top_k)[0]


def attribute_answers(llm, items: Sequence[tuple[Document, str, str, str, Sequence[tuple[int, int]] | None]],
                      top_k: int = 3) -> list[list[AttributedSpan]]:
    """`attribute_answer` for several (doc, prefix, suffix, answer, candidates) at once, through
    `LLM.attribute_many` (one forward for their remainders and answers, each document's KV from the
    prefix cache); the prompt goes as (prefix + doc.text, suffix), tokenized as `generate_shared`
    tokenized it, and a document's sentences are cut once."""
    sentences: dict[int, list[tuple[int, int]]] = {}
    resolved = []
    for doc, prefix, suffix, answer, candidates in items:
        if candidates is None:
            if id(doc) not in sentences:
                sentences[id(doc)] = sentence_spans(doc)
            candidates = sentences[id(doc)]
        resolved.append((doc, prefix, suffix, answer, list(candidates)))
    out: list[list[AttributedSpan]] = []
    for (doc, _, _, _, spans), got in zip(resolved, attention_shares(llm, resolved), strict=True):
        if got is None:
            out.append([])
            continue
        ranked = sorted(zip(spans, got, strict=True), key=lambda p: (-p[1][0], p[0][0]))
        out.append([AttributedSpan(doc.span(s, e), share, mass) for (s, e), (share, mass) in ranked[:top_k]])
    return out


def attention_shares(llm, items: Sequence[tuple[Document, str, str, str, Sequence[tuple[int, int]]]]
                     ) -> list[list[tuple[float, float]] | None]:
    """For each (doc, prefix, suffix, text, spans): the (share, mass) of the attention that `text`,
    read after prefix + doc.text + suffix, puts on each span of `doc` (in the spans' order); None
    for an item without spans or text. All items in one `LLM.attribute_many` call."""
    asked, calls = [], []
    for n, (doc, prefix, suffix, text, spans) in enumerate(items):
        if not spans or not text.strip():
            continue
        shift = len(prefix)
        asked.append(n)
        calls.append(((prefix + doc.text, suffix), text, [(s + shift, e + shift) for s, e in spans]))
    out: list[list[tuple[float, float]] | None] = [None] * len(items)
    for n, res in zip(asked, llm.attribute_many(calls) if calls else [], strict=True):
        out[n] = [(float(a.share), float(a.mass)) for a in res.spans]
    return out
