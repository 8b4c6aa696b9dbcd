"""The export of the patent pipeline: pydantic v2 models, versioned by `SCHEMA_VERSION`.

Every span is a `pipelines.documents.SourceSpan` (`doc.text[char_start:char_end] == text`).
Lists are ordered (claims by number, findings by claim, code and position, trees by root), so the
same input gives byte-identical JSON.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from pipelines.base import ResultBase
from pipelines.documents import DocumentInfo, SourceSpan

SCHEMA_VERSION = "patents/1.0"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ClaimsSection(_Model):
    """Where the claims were found and how."""

    found: bool
    method: str = Field(description="heading | whole_input | first_claim | none")
    heading: str | None = Field(default=None, description='the heading found, e.g. "What is claimed is"')
    heading_span: SourceSpan | None = None
    span: SourceSpan | None = None


class Reference(_Model):
    """A reference phrase inside a claim and the claims it names."""

    text: str
    span: SourceSpan
    claims: list[int]
    kind: str = Field(description="single | alternative | conjunctive | range | all_preceding | preceding | external")


class Claim(_Model):
    """One claim with its dependencies and structure."""

    number: int
    status: str = Field(description='"active", or the US prosecution status: "original", "currently amended", ...')
    cancelled: bool
    independent: bool
    depends_on: list[int]
    multiple_dependent: bool
    references: list[Reference]
    category: str = Field(description="method | apparatus | composition | medium | use | unknown")
    subject: str | None = Field(default=None, description="the subject noun phrase of the preamble")
    preamble: SourceSpan | None = None
    transition: SourceSpan | None = None
    transition_kind: str | None = Field(
        default=None,
        description="comprising | including | consisting_of | consisting_essentially_of | characterized | wherein | having | containing",
    )
    elements: list[SourceSpan]
    text: str = Field(description="the claim's text (page furniture inside it left out)")
    span: SourceSpan
    status_span: SourceSpan | None = None


class Finding(_Model):
    """A problem in the claim set, with the spans that show it."""

    code: str
    severity: str = Field(description="error | warning | info")
    message: str
    claims: list[int]
    spans: list[SourceSpan]


class TreeNode(_Model):
    """A claim in the dependency tree. A claim with several parents appears under each; its
    subtree is spelled out at its first appearance only (`repeat` elsewhere). Below a fixed depth
    the subtree continues as a separate entry of `trees` (`continued` here, `continuation` there)."""

    number: int
    status: str
    category: str
    findings: list[str] = Field(default_factory=list, description="codes of findings on this claim")
    repeat: bool = False
    continued: bool = False
    continuation: bool = False
    children: list[TreeNode] = Field(default_factory=list)


class Stats(_Model):
    """Counts over the claim set."""

    n_claims: int
    n_active: int
    n_cancelled: int
    n_independent: int
    n_dependent: int
    n_multiple_dependent: int
    max_depth: int
    categories: dict[str, int]
    findings_by_severity: dict[str, int]
    findings_by_code: dict[str, int]
    is_dag: bool


class PatentResult(ResultBase):
    """The export of one document through the patent claim-tree pipeline."""

    document: DocumentInfo
    language: str = Field(description="en | zh")
    claims_section: ClaimsSection
    claims: list[Claim]
    findings: list[Finding]
    trees: list[TreeNode]
    unattached: list[int] = Field(
        default_factory=list, description="dependent claims not reachable from any independent claim"
    )
    stats: Stats


TreeNode.model_rebuild()
