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
    spans = list(candidates) if candidates is not None else sentence_spans(doc)
    if not spans or not answer.strip():
        return []
    shift = len(prefix)
    out = llm.attribute(prefix + doc.text + suffix, answer, [(s + shift, e + shift) for s, e in spans])
    ranked = sorted(zip(spans, out.spans, strict=True), key=lambda p: (-p[1].share, p[0][0]))
    return [AttributedSpan(doc.span(s, e), float(a.share), float(a.mass)) for (s, e), a in ranked[:top_k]]
