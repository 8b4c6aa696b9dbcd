"""The medical export contract (pydantic v2): patient, the problem list and medication list a
clinician reads first, documents (the shared `DocumentInfo` with
the note's kind, date, language and sections beside it), entities with assertions, time expressions, events on one timeline, relations, conflicts and ranked evidence.

Every span is a `SourceSpan` with `doc.text[char_start:char_end] == text`. Lists are ordered and
ids assigned deterministically, floats rounded, so the same input gives byte-identical JSON.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, model_serializer

from pipelines.base import ResultBase
from pipelines.documents import DocumentInfo, SourceSpan
from pipelines.llm import LLMReport

SCHEMA_VERSION = "medical/2.5"  # 2.5: --ask answers carry warnings (text imitating the prompt); 2.4: evidence-first --ask answers (status, confidence, value, quotes); 2.3: optional llm (steps, --ask answers), llm_context, answers; encoding_note


class _M(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TimeInterval(_M):
    """ISO interval [start, end) with its granularity and what it was anchored to: absolute,
    document (the note's date), admission, surgery, discharge, or unanchored (start/end null)."""

    start: str | None = None
    end: str | None = None
    granularity: str | None = None
    anchored_to: str = "unanchored"


class SectionOut(_M):
    key: str
    label: str
    heading: SourceSpan
    body: SourceSpan | None = None


class MedicalDocument(_M):
    """One of the patient's documents: the shared `DocumentInfo` and what the pipeline found about
    the note (its kind, date and where that came from, language, sections)."""

    info: DocumentInfo
    kind: str
    date: str | None
    date_source: str
    language: str
    sections: list[SectionOut]


class Anchor(_M):
    date: str
    source: SourceSpan | None = None
    how: str


class Patient(_M):
    """The patient: the id (input hash), what the documents state about who it is (the first
    statement of each; disagreements are `identity` conflicts) and the stay's anchor dates."""

    id: str
    name: str | None = None
    record_number: str | None = None
    sex: str | None = None
    age: str | None = None
    anchors: dict[str, Anchor] = {}


class Entity(_M):
    id: str
    type: str
    text: str
    span: SourceSpan
    doc_id: str
    assertion: str
    normalized: dict[str, Any] = {}
    concept: str
    section: str | None = None
    trigger: SourceSpan | None = None
    time: TimeInterval | None = None


class TimeExpression(_M):
    id: str
    text: str
    span: SourceSpan
    kind: str
    time: TimeInterval


class Event(_M):
    id: str
    type: str
    concept: str
    status: str  # present | negated | possible | historical | mixed
    time: TimeInterval
    mentions: list[str]
    sources: list[SourceSpan]
    documents: list[str]


class Relation(_M):
    a: str
    b: str
    type: str  # before | overlap


class Conflict(_M):
    id: str
    kind: str
    concept: str
    date: str | None
    description: str
    entities: list[str]
    sources: list[SourceSpan]


class EvidenceItem(_M):
    span: SourceSpan
    score: float
    doc_id: str
    section: str | None = None
    entities: list[str] = []
    scores: dict[str, float] = {}


class Evidence(_M):
    claim: str
    kind: str = "question"  # question | diagnosis
    target: str | None = None  # entity id of the conclusion (diagnosis chains)
    supporting: list[EvidenceItem]
    contradicting: list[EvidenceItem]
    method: str
    chain: list[str] = []  # events behind the supporting evidence, in time order (the evidence chain)
    # LLM step medical.attention_evidence: the record sentences the claim (or its question's answer)
    # attends to most in the whole context, best first, whatever their retrieval score (absent without the step)
    attention: list[EvidenceItem] | None = None

    @model_serializer(mode="wrap")
    def _leave_out_attention_when_not_run(self, handler):
        data = handler(self)
        if isinstance(data, dict) and data.get("attention", 0) is None:
            del data["attention"]
        return data


class ProblemItem(_M):
    """One problem of the problem list: active (stated present or possible at its latest mention),
    resolved (negated or said resolved after it was present) or historical (past history only),
    with its first and last evidence."""

    concept: str
    text: str
    status: str  # active | resolved | historical
    first: str | None = None  # ISO date of the first dated mention
    last: str | None = None
    first_evidence: SourceSpan
    last_evidence: SourceSpan
    entities: list[str]


class MedicationItem(_M):
    """One drug of the medication list: the latest dose, route and frequency stated, when it started
    and stopped (from the notes that start and stop it, else its first and last mention), and whether
    it is new in the stay or continued from before (home medication list)."""

    drug: str
    dose: str | None = None
    route: str | None = None
    frequency: str | None = None
    start: str | None = None
    stop: str | None = None
    status: str  # new | continued
    stopped: bool = False
    first_evidence: SourceSpan
    last_evidence: SourceSpan
    entities: list[str]


class AnswerSentence(_M):
    """One sentence of a generated answer and the record's sentences it rests on (the answer
    sentence's attention over the patient's sentences, best first; `score` its share among them)."""

    text: str
    evidence: list[EvidenceItem]


class Answer(_M):
    """A short generated answer to a question (LLM step `medical.answer`); every sentence links to
    its evidence. error: one line when the question got no grounded answer."""

    question: str
    text: str
    sentences: list[AnswerSentence] = []
    error: str | None = None


class LLMContext(_M):
    """What the LLM steps read: the whole patient ("whole patient": every document, one after the
    other) or, when it does not fit the model's context, the retrieval fallback ("retrieval": the
    sentences the evidence ranking found for the conclusions and questions, in record order, as
    many as fit). note: one line saying so."""

    strategy: str  # whole patient | retrieval
    tokens: int
    documents: int
    sentences: int
    sentences_total: int
    note: str
    answer_note: str | None = None  # when the answers read less than this context (medical.answer on a CPU)


_LLM_FIELDS = ("llm", "llm_context", "answers")


class MedicalResult(ResultBase):
    patient: Patient
    problems: list[ProblemItem] = []
    medications: list[MedicationItem] = []
    documents: list[MedicalDocument]
    entities: list[Entity]
    times: list[TimeExpression]
    events: list[Event]
    relations: list[Relation]
    conflicts: list[Conflict]
    evidence: list[Evidence]
    warnings: list[str] = []
    # the LLM steps' part (pipelines/medical/llm_steps.py): absent from the export when no step was asked for
    llm: LLMReport | None = None
    llm_context: LLMContext | None = None
    answers: list[Answer] | None = None

    @model_serializer(mode="wrap")
    def _leave_out_unused_llm_fields(self, handler):
        data = handler(self)
        if isinstance(data, dict):
            for k in _LLM_FIELDS:
                if data.get(k, 0) is None:
                    del data[k]
        return data
