"""The export contract of the reports pipeline (pydantic v2): targets, mentions, unresolved mentions.

A *target* is something a report refers to: a figure, table, exhibit or chart (with caption,
object box, parsed rows and a plain-text description), a section, a footnote, a bibliography entry
or a numbered equation. A *mention* is a place in the text that refers to targets ("see Figure 3",
"如图1所示", "the table above", "[3]"); it carries the targets it resolved to, a confidence and the
rule that decided it. Every span is a `SourceSpan` into the document text.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_serializer

from pipelines.base import ResultBase
from pipelines.documents import DocumentInfo, SourceSpan
from pipelines.llm import LLMReport

SCHEMA_VERSION = "reports/1.5"  # 1.5: --ask answers carry warnings (text imitating the prompt); the deep summary is quoted key sentences (centrality, attention, score), no generated text; 1.4: evidence-first --ask answers (status, confidence, value, quotes); 1.3: optional llm (steps, --ask answers), scope, deep_summary; encoding_note

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


class ScopeDecision(_Model):
    """reports.scope: an uncertain mention's internal/external decision by scoring, fused with the
    rules. `rule_p_external` is the rules' belief that the mention names another work's float (a
    prior per rule case, see pipelines.reports.llm_steps), `model_margin` the model's
    log p(external) - log p(internal) for the sentence, less the same margin for a content-free
    sentence (calibration); `p_external` = sigmoid(logit(rule_p_external) + model_margin)."""

    mention: int = Field(description="index into `mentions`")
    text: str
    span: SourceSpan
    context: SourceSpan = Field(description="the sentence given to the model")
    case: str = Field(description="why the rules were unsure: external_inferred, external_by_sentence, no_such_number, internal_near_other_work")
    rule_resolution: Resolution
    rule_p_external: float
    logprobs: dict[str, float] = Field(default_factory=dict, description="label -> log p(continuation | prompt)")
    model_margin: float
    p_external: float
    decision: Literal["internal", "external"]
    changed: bool = Field(description="the mention's resolution or targets changed")


class Callout(_Model):
    """A figure/table callout in the deep summary: the target it resolves to (multi-hop: through a
    chain mention, or through the caption of a float that cites another), and at the target's first
    callout its description (caption, kind, page, what the PDF says; at most ~85 tokens)."""

    mention: SourceSpan = Field(description="the callout in the text, or the mention inside a caption it was reached through")
    target: str | None = Field(None, description="target id; None when the callout is external or unresolved")
    label: str = ""
    kind: str = ""
    page: int | None = None
    bbox: BBox | None = None
    resolution: Resolution = "internal"
    first: bool = Field(False, description="the target's first callout in the summary: its description is inlined here")
    description: str = Field("", description="inlined at the first callout only")
    description_tokens: int = 0
    via: list[str] = Field(default_factory=list, description="targets (or mention text) followed to reach this one")
    hops: int = 0
    sentence: int | None = Field(None, description="index of the summary sentence it is inlined after")


class SummarySentence(_Model):
    """A key sentence of the report, quoted exactly (`text` is `spans[0].text`), and why it was
    chosen: its centrality among the section's sentences and the model's attention on it, each as a
    ratio to the uniform share (1.0: average), fused into `score`."""

    text: str
    spans: list[SourceSpan] = Field(default_factory=list)
    grounding: Literal["quoted"] = Field("quoted", description="quoted: the sentence is the document's own text")
    centrality: float = Field(0.0, description="LexRank share of the sentence among its section's sentences x their number")
    attention: float | None = Field(None, description="the model's attention share on it x the sentences read with it; None: not read")
    score: float = Field(0.0, description="fused: the mean of the two z-scored logs (centrality alone where attention was not read)")


class SectionSummary(_Model):
    section: str | None = Field(None, description="the heading's target id; None for front matter or a page group")
    title: str
    char_start: int
    char_end: int
    pages: list[int]
    sentences: list[SummarySentence] = Field(default_factory=list)
    callouts: list[Callout] = Field(default_factory=list)
    error: str | None = None
    fallback: str | None = Field(None, description="the engine's fallback for this prompt: strategy and what it dropped")


class DeepSummary(_Model):
    """reports.deep_summary: the key sentences of each section and of the whole report, quoted from
    the document (extractive: chosen by centrality and the model's attention; no generated text), the
    section's figure/table callouts inlined. strategy: 'key sentences' (attention read) or 'key
    sentences (centrality only)' (the model could not be read; why in `dropped`)."""

    strategy: str
    document_tokens: int
    max_model_len: int
    sections: list[SectionSummary]
    whole: list[SummarySentence] = Field(default_factory=list)
    whole_error: str | None = None
    dropped: list[str] = Field(default_factory=list, description="what the summary left out, one line each")


_LLM_FIELDS = ("llm", "scope", "deep_summary")


class ReportResult(ResultBase):
    """The reports pipeline's export."""

    document: DocumentInfo
    targets: list[Target]
    mentions: list[Mention]
    unresolved: list[Unresolved]
    unreferenced_targets: list[str]
    stats: dict[str, int] = Field(default_factory=dict)
    warnings: list[str] = Field(default_factory=list)
    llm: LLMReport | None = None
    scope: list[ScopeDecision] | None = Field(None, description="reports.scope decisions (LLM step; absent when it did not run)")
    deep_summary: DeepSummary | None = Field(None, description="reports.deep_summary (LLM step; absent when it did not run)")

    @model_serializer(mode="wrap")
    def _leave_out_unrun_steps(self, handler):
        """The LLM fields are left out when no step ran, so `--llm off` export is the rules-only one."""
        data = handler(self)
        if isinstance(data, dict):
            for k in _LLM_FIELDS:
                if data.get(k) is None:
                    data.pop(k, None)
        return data
