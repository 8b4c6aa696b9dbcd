"""The export contract of the reports pipeline (pydantic v2): targets, mentions, unresolved mentions.

A *target* is something a report refers to: a figure, table, exhibit or chart (with caption,
object box, parsed rows and a plain-text description), a section, a footnote, a bibliography entry
or a numbered equation. A *mention* is a place in the text that refers to targets ("see Figure 3",
"如图1所示", "the table above", "[3]"); it carries the targets it resolved to, a confidence and the
rule that decided it. Every span is a `SourceSpan` into the document text.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from pipelines.base import ResultBase
from pipelines.documents import DocumentInfo, SourceSpan

SCHEMA_VERSION = "reports/1.2"

TargetKind = Literal["figure", "table", "exhibit", "chart", "section", "footnote", "reference", "equation"]
MentionKind = Literal["figure", "table", "exhibit", "chart", "section", "footnote", "citation", "equation", "deictic", "chain"]
Resolution = Literal["internal", "external", "ambiguous", "unresolved"]

BBox = tuple[float, float, float, float]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Target(_Model):
    """Something the text refers to."""

    id: str
    kind: TargetKind
    label: str = Field(description="the label as printed: 'Figure 3', '图 2-1', 'Section 2.3', '[12]'")
    number: str = Field(description="the number as printed, any dash shown as '-': '3', '2-1', '2.1', 'II', 'A.3'; '' when unnumbered")
    caption: str = ""
    description: str = Field("", description="plain-text description: caption, words inside the figure, table header and first rows")
    page: int
    bbox: BBox | None = Field(None, description="box of the whole object (caption plus graphic or table) on `page`")
    span: SourceSpan = Field(description="the caption, heading, note or entry in the text")
    rows: list[list[str]] = Field(default_factory=list, description="table rows (tables only)")
    continued_on: list[int] = Field(default_factory=list, description="pages where the object continues ('续表', 'continued')")
    evidence: str = Field("", description="why this was taken as a target")


class Mention(_Model):
    """A reference in the text, with what it resolved to."""

    text: str
    span: SourceSpan
    page: int
    bbox: BBox | None = None
    boxes: list[BBox] = Field(default_factory=list, description="one box per line when the mention wraps (PDF input)")
    kind: MentionKind
    targets: list[str] = Field(default_factory=list, description="target ids")
    resolution: Resolution = "internal"
    hops: int = Field(0, ge=0, description="mentions followed to reach the targets (chains: 'the figures mentioned earlier')")
    confidence: float = Field(ge=0.0, le=1.0)
    reason: str
    panel: str | None = Field(None, description="sub-figure letter: 'Fig. 2a' -> 'a'")


class Unresolved(_Model):
    """A mention with no internal target, and why."""

    text: str
    span: SourceSpan
    page: int
    kind: MentionKind
    why: Literal["no_such_number", "ambiguous", "no_text_layer", "no_target_in_direction", "no_antecedent", "no_entry"]
    reason: str
    candidates: list[str] = Field(default_factory=list)


class ReportResult(ResultBase):
    """The reports pipeline's export."""

    document: DocumentInfo
    targets: list[Target]
    mentions: list[Mention]
    unresolved: list[Unresolved]
    unreferenced_targets: list[str]
    stats: dict[str, int] = Field(default_factory=dict)
    warnings: list[str] = Field(default_factory=list)
