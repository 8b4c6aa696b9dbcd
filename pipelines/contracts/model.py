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
from pipelines.llm import LLMReport

SCHEMA_VERSION = "contracts/2.4"  # 2.4: --ask answers carry warnings (text imitating the prompt); 2.3: evidence-first --ask answers (status, confidence, value, quotes); 2.2: optional llm (steps, --ask answers), explanations, amendment summary, materiality; encoding_note
# 2.1: flag kinds standard, disclaimer, wording; settings.min_content

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


def _absent(value) -> bool:
    return value is None


def _llm_field(description: str):
    """An optional field an LLM step fills; left out of the export while None, so a result without
    LLM steps (`--llm off`) is exported exactly as before they existed."""
    return Field(default=None, exclude_if=_absent, description=description)


class Explanation(_Model):
    """`contracts.explain`: what changed and in which direction, in one or two sentences, resting on
    the old and new spans shown to the model (the changed sub-spans of the clause pair where the
    redline has them, else the whole added or deleted clause). `hint`: the deterministic direction
    of the changed figures and obligation words ("30 days → 60 days: longer"), given to the model
    and appended to `text` when the model's sentence does not already name the new value. A generated
    sentence whose words are mostly not in the clause pair (`support` below the step's threshold:
    a small model copying its example or inventing), or one that only echoes one quoted phrase as both
    the old and the new words, or one that mostly copies the clause's text, is not kept: `text` is then the rules' own
    sentence (the changed words and their direction) and `generated` keeps what the model said."""

    text: str
    generated: str  # the model's own words, before the hint was appended
    hint: str | None = None
    support: float = 0.0  # share of the generated sentence's content words found in the old/new text shown
    kept: bool = False  # the generated sentence was kept (support high enough); else `text` is the rules' sentence
    a_spans: list[SourceSpan] = []
    b_spans: list[SourceSpan] = []


class Materiality(_Model):
    """`contracts.materiality`: the model's judgement by scoring (log-probabilities of " material"
    and " cosmetic" after a prompt showing the old and new words, corrected by the same scores after
    a content-free prompt) and its fusion with the rule flags (`pipelines.contracts.llm_steps.fuse`).
    `score`: calibrated log-odds material vs cosmetic; `rule_material` / `rule_tier`: what the rules
    said (tier 0: obligations, money, periods, standards…; 1: added or deleted clause; 2: other
    material; 3: not material); `material`: the fused decision (also written to the item's
    `material`)."""

    label: Literal["material", "cosmetic"]
    score: float
    logprob_material: float
    logprob_cosmetic: float
    rule_material: bool
    rule_tier: int
    material: bool
    changed: bool  # the fusion changed the rules' decision


class SummaryItem(_Model):
    row: int  # index into `alignment`
    a: str | None
    b: str | None
    change: ChangeType
    material: bool
    kinds: list[str]
    text: str
    explanation: Explanation | None = _llm_field("contracts.explain: what changed and in which direction")
    materiality: Materiality | None = _llm_field("contracts.materiality: the model's judgement fused with the rules")


class AmendmentSentence(_Model):
    """One sentence of the amendment summary and what it rests on: the summary items (`rows`:
    indexes into `alignment`) whose explanations it draws on most (the sentence's attention over
    the listed changes), and their old and new spans."""

    text: str
    rows: list[int] = []
    a_spans: list[SourceSpan] = []
    b_spans: list[SourceSpan] = []


class AmendmentSummary(_Model):
    """`contracts.summary`: one paragraph summarising the whole amendment, sentence by sentence.
    `generated`: the model's paragraph as written; `kept`: some of its sentences were grounded in the
    listed changes (their content words found there) and make `text`; else `text` is the rules'
    paragraph (how many material changes, the first three with their explanations)."""

    text: str
    sentences: list[AmendmentSentence] = []
    generated: str = ""
    kept: bool = False


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
    amendment: AmendmentSummary | None = _llm_field("contracts.summary: one paragraph on the whole amendment")
    llm: LLMReport | None = _llm_field("the LLM steps of this run (mode, model, each step's cost); absent with --llm off")

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
