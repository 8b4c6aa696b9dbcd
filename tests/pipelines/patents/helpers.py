"""Helpers for the patent tests: the fixtures folder, truth loading, and walking every span of an
export."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

from pipelines.documents import SourceSpan
from pipelines.patents.model import PatentResult

ROOT = Path(__file__).resolve().parents[3]
FIXTURES = ROOT / "tests" / "fixtures" / "patents"
SAMPLES = ROOT / "data" / "samples" / "patents"
CORPUS_IDS = sorted(p.name[: -len(".truth.json")] for p in FIXTURES.glob("*.truth.json"))


def load_truth(patent_id: str) -> dict:
    return json.loads((FIXTURES / f"{patent_id}.truth.json").read_text(encoding="utf-8"))


def load_text(patent_id: str) -> str:
    return (FIXTURES / f"{patent_id}.txt").read_text(encoding="utf-8")


def iter_spans(result: PatentResult) -> Iterator[SourceSpan]:
    """Every SourceSpan anywhere in the export."""
    sec = result.claims_section
    for s in (sec.heading_span, sec.span):
        if s is not None:
            yield s
    for c in result.claims:
        yield c.span
        for s in (c.preamble, c.transition, c.status_span, c.limitation):
            if s is not None:
                yield s
        yield from c.elements
        stack = list(c.parts)
        while stack:
            p = stack.pop()
            yield p.span
            stack.extend(p.parts)
        for r in c.references:
            yield r.span
    for f in result.findings:
        yield from f.spans


def deps(result: PatentResult) -> dict[int, list[int]]:
    return {c.number: c.depends_on for c in result.claims}
