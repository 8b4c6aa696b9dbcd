"""The export of the patent pipeline: pydantic v2 models, versioned by `SCHEMA_VERSION`.

Every span is a `pipelines.documents.SourceSpan` (`doc.text[char_start:char_end] == text`).
Lists are ordered (claims by number, findings by claim, code and position, trees by root), so the
same input gives byte-identical JSON.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_serializer

from pipelines.base import ResultBase
from pipelines.documents import DocumentInfo, SourceSpan
from pipelines.llm import LLMReport

SCHEMA_VERSION = "patents/1.4"  # 1.4: --ask answers carry warnings (text imitating the prompt); 1.3: evidence-first --ask answers, claim_summaries.model_text; 1.2: optional llm,
# claim_summaries; document.encoding_note


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


class ClaimPart(_Model):
    """An element of a claim's body with the elements it holds: "wherein the fan assembly
    comprises:" holds "a housing …", "a box fan unit …" and "mounting hooks …". Nesting stops at
    16 levels: deeper elements stay at the 16th, in their order."""

    span: SourceSpan
    parts: list[ClaimPart] = Field(default_factory=list)


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
    parts: list[ClaimPart] = Field(
        default_factory=list,
        description="the elements nested, when an element holds others (one ending in a colon holds the items "
        "after it); empty when the elements are flat (then `elements` is the whole structure)",
    )
    limitation: SourceSpan | None = Field(
        default=None,
        description='what a dependent claim adds: from its transition ("wherein …", "further comprising …", '
        '"其特征在于…") to its end',
    )
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
    label: str = Field(
        default="",
        description="what the reader sees: a dependent claim's limitation, an independent claim's preamble, shortened",
    )
    findings: list[str] = Field(default_factory=list, description="codes of findings on this claim")
    repeat: bool = False
    continued: bool = False
    continuation: bool = False
    children: list[TreeNode] = Field(default_factory=list)


class ClaimCounts(_Model):
    """The claim counts a fee calculation needs, by the USPTO's rule (37 CFR 1.75(c), MPEP
    608.01(n)): a proper multiple dependent claim counts as the number of claims it refers to, and
    a claim depending on it, directly or through single dependencies, counts as that many too; an
    improper one (on another multiple dependent claim, or "claims 1 and 2") counts as one. The
    fee thresholds are the USPTO's: 20 claims in all, 3 independent."""

    rule: str = Field(description="the counting rule applied")
    independent: int = Field(description="independent claims (live)")
    total: int = Field(description="claims as numbered (live)")
    multiple_dependent: int = Field(description="multiple dependent claims (live)")
    total_for_fees: int = Field(description="claims as counted for fees")
    counted_as: dict[int, int] = Field(
        default_factory=dict, description="claims that count as more than one for fees: claim -> count"
    )
    excess_total: int = Field(description="claims for fees beyond 20")
    excess_independent: int = Field(description="independent claims beyond 3")
    multiple_dependent_fee: bool = Field(description="at least one proper multiple dependent claim (37 CFR 1.16(j))")


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
    claim_counts: ClaimCounts | None = None


class SummarySpan(_Model):
    """A span of the claim's own text a summary rests on, and the share of the summary's content
    words found in it."""

    span: SourceSpan
    share: float


class ClaimSummary(_Model):
    """The plain-language summary of one claim (LLM step `patents.claim_summaries`): for an
    independent claim what it covers, for a dependent claim what it adds to its parent."""

    claim: int
    kind: str = Field(description="independent | dependent")
    text: str = Field(description='the sentence: "Claim 1 covers …", "Claim 3 adds that …"')
    source: str = Field(description='"model" (generated), or "rules" (the scaffold, when the model gave nothing)')
    scaffold: str = Field(description="the rules-only summary built from the parsed preamble and elements")
    spans: list[SummarySpan] = Field(
        default_factory=list,
        description="the claim's preamble / elements whose words the sentence uses, best first",
    )
    grounding: float = Field(description="share of the sentence's content words found in the claim's own text")
    error: str | None = Field(default=None, description="why the model's sentence is missing (source rules)")
    model_text: str | None = Field(default=None, description="the model's sentence when it was not shown: the "
                                   "claim's own words do not carry it (source rules)")


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
    claim_summaries: list[ClaimSummary] | None = Field(
        default=None, description="LLM step patents.claim_summaries (absent when it did not run)"
    )
    llm: LLMReport | None = Field(default=None, description="the LLM steps of this run (absent with --llm off)")

    @model_serializer(mode="wrap")
    def _leave_out_llm_fields(self, handler):
        """The LLM fields are left out when None, so a rules-only export stays as it was."""
        data = handler(self)
        for k in ("claim_summaries", "llm"):
            if getattr(self, k) is None:
                data.pop(k, None)
        return data


TreeNode.model_rebuild()
ClaimPart.model_rebuild()
