"""The export contract of the contracts pipeline (pydantic v2, schema version below).

```
{"schema_version", "pipeline", "pipeline_version", "input_sha256",
 "documents": {"a": {"info": DocumentInfo, "language", "separators"}, "b": {...}},
 "clauses":   {"a": [{"anchor", "number", "heading", "kind", "level", "parent", "span", "defines", "xrefs"}], "b": [...]},
 "alignment": [{"a": anchor|null, "b": anchor|null, "change", "score", "edited", "renumbered", "moved",
                "group", "diff": [{"op", "a_span", "b_span"}], "flags": [{"kind", "a_span", "b_span", "detail", "material"}]}],
 "summary":   [{"row", "a", "b", "change", "material", "kinds", "text"}]   (material changes first),
 "stats": {...}, "settings": {...}}
```
Every span is a `SourceSpan` (`doc.text[char_start:char_end] == text`). No timestamps, no sets, no
machine paths: the same input gives byte-identical JSON.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from pipelines.base import ResultBase
from pipelines.documents import DocumentInfo, SourceSpan

SCHEMA_VERSION = "contracts/2.1"  # 2.1: flag kinds standard, disclaimer, wording; settings.min_content

ChangeType = Literal["unchanged", "modified", "added", "deleted", "moved", "renumbered", "split", "merged"]
OpType = Literal["equal", "format", "renumber", "replace", "insert", "delete"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


def clause_title(anchor: str, heading: str | None, kind: str, limit: int = 60) -> str:
    """How a reader names a clause: its number with its heading ("B.2 Required Information",
    "第十二条"), a heading's own text ("Summary", not its id "h:summary"), "Preamble" for opening text."""
    base = anchor.split("~")[0]
    if heading and len(heading) > limit:
        heading = heading[:limit - 1] + "…"
    if kind == "heading" or base.startswith("h:"):
        return heading or base[2:]
    if kind == "preamble" or base.startswith("preamble"):
        return "Preamble"
    return f"{base} {heading}" if heading else base


class ContractVersion(_Model):
    """One version of the agreement: the shared `DocumentInfo` and what the comparison adds to it."""

    info: DocumentInfo
    language: str
    separators: list[str] = []  # the whitespace before, between and after the clauses (len = clauses + 1)


class CrossReference(_Model):
    target: str  # the label referred to, normalised: "4.2", "B(5)", "第十二条"
    anchor: str | None  # the clause it resolves to in the same version, if any
    external: bool = False  # refers to another instrument ("Article 4 of the GDPR", 《民法典》第X条)
    span: SourceSpan


class ClauseOut(_Model):
    anchor: str
    number: str | None
    heading: str | None
    kind: str
    level: int
    parent: str | None
    span: SourceSpan
    defines: list[str] = []
    xrefs: list[CrossReference] = []

    @property
    def title(self) -> str:
        """The clause as a reader names it (`clause_title`)."""
        return clause_title(self.anchor, self.heading, self.kind)


class DiffOp(_Model):
    op: OpType
    a_span: SourceSpan | None
    b_span: SourceSpan | None


class Flag(_Model):
    kind: str  # amount | percentage | date | duration | number | obligation | negation | defined_term | cross_reference
    #          | definition_changed | standard | disclaimer | wording
    a_span: SourceSpan | None
    b_span: SourceSpan | None
    detail: str
    material: bool = True


class AlignmentRow(_Model):
    a: str | None
    b: str | None
    change: ChangeType
    score: float = Field(description="alignment score on the threshold's scale: content similarity (0-1) plus anchor "
                                     "and context agreement (up to +0.2); for added/deleted rows the best score found")
    edited: bool = False
    renumbered: bool = False
    moved: bool = False
    group: str | None = None  # rows of one split, merge or block move share it
    diff: list[DiffOp] = []
    flags: list[Flag] = []


class SummaryItem(_Model):
    row: int  # index into `alignment`
    a: str | None
    b: str | None
    change: ChangeType
    material: bool
    kinds: list[str]
    text: str


class Settings(_Model):
    method: str  # "ngram" or "ngram+minilm"
    threshold: float
    min_content: float | None = None  # content score below which no pair is matched
    w_anchor: float
    w_context: float
    w_semantic: float
    embedder: str | None


class ContractResult(ResultBase):
    documents: dict[str, ContractVersion]
    clauses: dict[str, list[ClauseOut]]
    alignment: list[AlignmentRow]
    summary: list[SummaryItem]
    stats: dict[str, int]
    settings: Settings

    def title(self, side: str, anchor: str | None) -> str:
        """The reader's name of clause `anchor` of version `side` ("a" or "b"); "—" for none."""
        if anchor is None:
            return "—"
        for c in self.clauses[side]:
            if c.anchor == anchor:
                return c.title
        return anchor

    def where(self, row: AlignmentRow) -> str:
        """A row's clauses as a reader names them: one name when both sides agree, else "A → B"."""
        ta, tb = self.title("a", row.a), self.title("b", row.b)
        return ta if ta == tb else f"{ta} → {tb}"
