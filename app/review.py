"""Review tables: the same questions asked of every input of a folder, one row per input (a contract
pair, a patient, a report, a patent), one column per question.

    longdoc batch FOLDER --pipeline P --ask "Q1" --ask "Q2" [--questions FILE] [--cache-dir C] --out DIR

Questions file: one question per line, blank lines and lines starting with '#' skipped; a line may
start with a short column name, `name<TAB>question` or `name: question` (the name: one to three
words of letters, digits, '_', '.' or '-', at most 32 characters; "What is the cap: fees or a
sum?" has four words before its colon, so it is a question without a name). Questions without a
name get `Q1`, `Q2`, ... by their place in the list; a question asked twice is asked once.

Each cell holds an evidence-first answer (pipelines.llm.evidence; `LLMRun.ask`): its status
("answered", "not_stated", "error"), the quoted passages that hold it (document, character
offsets, page, box), the value asked for as a span inside the first passage, the shown answer
(that value, the model's wording where the quotes carry it, or the first quote; "not stated in
the document" when no passage clears the calibrated threshold, with the near misses), the model's
own text and whether the quotes carry it, a calibrated confidence (the probability, fitted on the
development QA set, that the shown answer is right; for "not stated", that the document does not
hold it), and, when the input did not fit the model's context, one line saying what the model
read instead.

Where it is written (DIR is --out):
- `DIR/review/<pipeline>/<input id>.json`: one row file per input (schema `review/1.0`), written
  atomically; it keeps every cell ever computed for that input, each with its `key` (the input's
  hash, the question, the model line and the review settings). A cell whose key is there is not
  computed again, so a re-run with one more question computes only that column; with --cache-dir
  the engine loads the document's KV from disk instead of computing it. Cells whose engine failed
  (no model, cancelled, over budget) are computed again on the next run; an empty answer is kept.
  A cell's `seconds` is the wall time of the engine call that answered it, shared by the questions
  answered together: with `--group N` that is every question of the group's inputs, so it is the
  group's time, not one input's.
- `DIR/review.json` (the table: header, questions, one row per input with the cells of the asked
  questions), `DIR/review.csv` (the grid: one line per input, the answer text in each question's
  column), `DIR/review-sources.csv` (one line per cell: answer, status, confidence, the passages it quotes,
  what was read) and `DIR/review.xlsx` (sheets Answers, Sources, Questions).

All questions of an input that fits are answered in one batch over it (the engine's document
cache: its KV computed once). When it does not fit and the pipeline has a structure, the model
reads, per question, the pipeline's units most relevant to the question (BM25 over the units),
in document order, each headed by its label, as many as fit: contracts: the clauses of both
versions (the contracts pipeline's segmentation); patents: the claims (the patents pipeline's
claims) and the paragraphs outside the claims section; reports: the sections (from each section
heading found by the reports pipeline to the next) and the figure and table captions; medical: the
notes' sentences, grouped under their note's name. A unit longer than a tenth of the room is cut
into parts at sentence ends. The cell's `fallback` says what was read. Without units (a pipeline
that finds none, or fails) the engine's own retrieval fallback serves it.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import re
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from app.export import write_atomic
from pipelines.documents import Document, DocumentInfo, IngestError, Joined, SourceSpan, input_sha256
from pipelines.llm.evidence import FUSION, low_confidence

SCHEMA_VERSION = "review/2.1"  # 2.1: cells carry warnings (text imitating the prompt) and whether the confidence is calibrated for the model; 2.0: evidence-first cells (status, value, near misses, model text; calibrated confidence)
REVIEW_VERSION = "2.1"  # bump when what a cell holds for the same key would change
ROWS_DIR = "review"
MAX_TOKENS = 48
CONFIDENCE_BASIS = ("calibrated probability that the shown answer is right (for not_stated: that the document "
                    "does not hold it), from retrieval, the model's attention and its reading of the passages")
_NAME = re.compile(r"^([A-Za-z0-9][A-Za-z0-9_.\-]*(?: [A-Za-z0-9_.\-]+){0,2})(?:\t|:\s+)(\S.*)$")


# ---------------------------------------------------------------------------------------------
# Questions


@dataclass(frozen=True)
class Question:
    """A column: its short name and the question asked."""

    name: str
    text: str


def parse_questions(asks: Sequence[str] = (), file_text: str | None = None) -> list[Question]:
    """The table's columns: the --ask questions, then the file's (format in the module docstring).
    Duplicate questions are asked once; duplicate names get a suffix. ValueError (one line) when
    there is no question or one is empty."""
    raw: list[tuple[str | None, str]] = []
    for q in asks:
        if not q.strip():
            raise ValueError("every --ask needs a question")
        raw.append((None, " ".join(q.split())))
    for line in (file_text or "").splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        m = _NAME.match(line)
        m = m if m and len(m.group(1)) <= 32 else None
        raw.append((m.group(1).strip(), " ".join(m.group(2).split())) if m else (None, " ".join(line.split())))
    out: list[Question] = []
    seen_q, seen_n = set(), set()
    for i, (name, text) in enumerate(raw, 1):
        if text in seen_q:
            continue
        seen_q.add(text)
        name = name or f"Q{i}"
        base, k = name, 2
        while name.casefold() in seen_n:
            name, k = f"{base} ({k})", k + 1
        seen_n.add(name.casefold())
        out.append(Question(name, text))
    if not out:
        raise ValueError("no question: pass --ask \"...\" or --questions FILE")
    return out


def load_questions(asks: Sequence[str], path: Path | None) -> list[Question]:
    """parse_questions with the file read; ValueError (one line) when it cannot be read."""
    text = None
    if path is not None:
        try:
            text = Path(path).read_text(encoding="utf-8-sig")
        except (OSError, UnicodeDecodeError) as exc:
            raise ValueError(f"{path}: cannot read the questions ({getattr(exc, 'strerror', None) or exc})") from None
    return parse_questions(asks, text)


# ---------------------------------------------------------------------------------------------
# The export model


class ReviewSpan(SourceSpan):
    """A passage an answer quotes (or a near miss), in its own document (doc_id as in the row's
    documents), with the calibrated probability that it holds the answer."""

    score: float


class Cell(BaseModel):
    """One answer. error: one line when there is none. fallback: what the model read when the
    input did not fit (None: the whole input). key: what the cell was computed from (see
    `cell_key`); a cell with the same key is not computed again."""

    model_config = ConfigDict(extra="forbid")

    name: str
    question: str
    answer: str
    status: str = "answered"
    error: str | None = None
    confidence: float | None = Field(default=None, description=CONFIDENCE_BASIS)
    value: SourceSpan | None = None
    spans: list[ReviewSpan] = Field(default_factory=list)
    near_misses: list[ReviewSpan] = Field(default_factory=list)
    model_text: str | None = None
    model_supported: bool | None = None
    fallback: str | None = None
    finish_reason: str | None = None
    prompt_tokens: int = 0
    cached_prompt_tokens: int = 0
    seconds: float = 0.0
    warnings: list[str] = Field(default_factory=list, description="what a reviewer should know about the evidence")
    calibrated: bool = Field(True, description="False: the confidence was fitted for the default model, not this one")
    key: str


class Row(BaseModel):
    """One input's row: what it is, its documents, the error that kept it from being read, and
    its cells. As a row file it also carries the export header."""

    model_config = ConfigDict(extra="forbid")

    input_id: str
    source_pipeline: str
    files: list[str]
    input_sha256: str
    documents: list[DocumentInfo] = Field(default_factory=list)
    error: str | None = None
    cells: list[Cell] = Field(default_factory=list)

    def cell(self, question: str) -> Cell | None:
        return next((c for c in self.cells if c.question == question), None)


class RowFile(Row):
    """`DIR/review/<pipeline>/<input id>.json`."""

    schema_version: str = SCHEMA_VERSION
    pipeline: str = "review"
    pipeline_version: str = REVIEW_VERSION
    model: str = ""


class QuestionOut(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    question: str


class ReviewTable(BaseModel):
    """`DIR/review.json`: the export header (schema_version review/1.0, pipeline "review", its
    version, input_sha256 of all the inputs' files), the model line, the confidence's basis, the
    questions (columns) and one row per input with the cells of those questions, in their order."""

    model_config = ConfigDict(extra="forbid")

    schema_version: str = SCHEMA_VERSION
    pipeline: str = "review"
    pipeline_version: str = REVIEW_VERSION
    input_sha256: str
    model: str
    confidence: str = CONFIDENCE_BASIS
    questions: list[QuestionOut]
    rows: list[Row]


def cell_key(input_sha: str, question: str, model: str) -> str:
    """What a cell was computed from: the input's hash, the question, the model line (model,
    device, dtype, context) and the review's own settings."""
    blob = json.dumps([input_sha, question, model, REVIEW_VERSION, MAX_TOKENS, FUSION.source], ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:32]


# ---------------------------------------------------------------------------------------------
# What the model reads when an input does not fit: the pipeline's units


@dataclass(frozen=True)
class Unit:
    """A piece of one of the input's documents the pipeline's structure names (a clause, a claim,
    a section, a caption, a note's sentence): docs[doc][start:end], with its label."""

    doc: int
    start: int
    end: int
    label: str


UNIT_KINDS = {"contracts": "clauses", "patents": "claims and paragraphs", "reports": "sections and captions",
              "medical": "note sentences"}


def _paragraphs(text: str, start: int, end: int) -> list[tuple[int, int]]:
    out = []
    for m in re.finditer(r"\S(?:.*?\S)?(?=\s*\n\s*\n|\s*$)", text[start:end], re.S):
        out.append((start + m.start(), start + m.end()))
    return out


def structure_units(pipeline: str, docs: list[Document]) -> list[Unit]:
    """The units of `docs` by the pipeline's structure (see the module docstring); [] for none."""
    index = {d.doc_id: i for i, d in enumerate(docs)}
    units: list[Unit] = []
    if pipeline == "contracts" and len(docs) == 2:
        from pipelines.contracts import ContractsPipeline

        res = ContractsPipeline().run_documents(docs)
        for side, i in (("a", 0), ("b", 1)):
            for c in res.clauses.get(side, []):
                name = docs[i].source_name or docs[i].doc_id
                label = f"{name}, {c.title}" if c.title else f"{name}, clause {c.anchor}"
                units.append(Unit(index.get(c.span.doc_id, i), c.span.char_start, c.span.char_end, label))
    elif pipeline == "patents" and len(docs) == 1:
        from pipelines.patents import PatentsPipeline

        res = PatentsPipeline().run_documents(docs)
        doc = docs[0]
        claims = [(c.span.char_start, c.span.char_end, f"claim {c.number}") for c in res.claims]
        sec = res.claims_section.span
        lo, hi = (sec.char_start, sec.char_end) if sec is not None else (
            (min(a for a, _, _ in claims), max(b for _, b, _ in claims)) if claims else (len(doc.text), len(doc.text)))
        paras = [(a, b, "paragraph") for a, b in _paragraphs(doc.text, 0, lo) + _paragraphs(doc.text, hi, len(doc.text))]
        units = [Unit(0, a, b, label) for a, b, label in sorted(claims + paras)]
    elif pipeline == "reports" and len(docs) == 1:
        from pipelines.reports import ReportsPipeline

        res = ReportsPipeline().run_documents(docs)
        doc = docs[0]
        heads = sorted((t.span.char_start, t) for t in res.targets if t.kind == "section")
        for k, (start, t) in enumerate(heads):
            end = heads[k + 1][0] if k + 1 < len(heads) else len(doc.text)
            units.append(Unit(0, start, end, t.label or "section"))
        if heads and heads[0][0] > 0:
            units.insert(0, Unit(0, 0, heads[0][0], "front matter"))
        for t in res.targets:
            if t.kind in ("figure", "table"):
                units.append(Unit(0, t.span.char_start, t.span.char_end, f"{t.label or t.kind} caption"))
    elif pipeline == "medical":
        from pipelines.llm import sentence_spans

        for i, d in enumerate(docs):
            name = d.source_name or d.doc_id
            units += [Unit(i, a, b, f"note {name}") for a, b in sentence_spans(d)]
    return [u for u in units if u.end > u.start]


def _split_long(units: list[Unit], docs: list[Document], max_chars: int) -> list[Unit]:
    """Units over max_chars cut into parts at sentence ends (a sentence over it cut where it must)."""
    from pipelines.llm import sentence_spans

    out: list[Unit] = []
    for u in units:
        if u.end - u.start <= max_chars:
            out.append(u)
            continue
        part = Document.from_text(docs[u.doc].text[u.start:u.end])
        pieces, a, b = [], None, None
        for s, e in sentence_spans(part):
            while e - s > max_chars:  # one sentence longer than the room
                if a is not None:
                    pieces.append((a, b))
                    a = None
                pieces.append((s, s + max_chars))
                s += max_chars
            if a is None:
                a, b = s, e
            elif e - a <= max_chars:
                b = e
            else:
                pieces.append((a, b))
                a, b = s, e
        if a is not None:
            pieces.append((a, b))
        for k, (s, e) in enumerate(pieces, 1):
            label = f"{u.label} (part {k} of {len(pieces)})" if len(pieces) > 1 else u.label
            out.append(Unit(u.doc, u.start + s, u.start + e, label))
    return out


@dataclass
class Reading:
    """The document the model reads for one question, built from units (`Document.join`: each unit
    under its label), mapping back to where each came from, and the line saying what was read."""

    joined: Joined
    line: str

    @property
    def doc(self) -> Document:
        return self.joined.doc


def build_reading(question: str, units: list[Unit], docs: list[Document], budget_tokens: int,
                  count: Callable[[str], int], doc_tokens: int, kind: str) -> Reading | None:
    """The most relevant units for `question` (BM25 over label and text; ties in document order)
    that fit in `budget_tokens`, in document order, each headed by its label; None when none fits."""
    from pipelines.text.retrieval import bm25_scores

    units = _split_long(units, docs, max(200, budget_tokens * 4 // 10))  # a tenth of the room, at ~4 chars a token
    texts = [f"{u.label}\n{docs[u.doc].text[u.start:u.end]}" for u in units]
    scores = bm25_scores(question, texts)
    order = sorted(range(len(units)), key=lambda k: (-scores[k], units[k].doc, units[k].start))
    chosen, used = [], 0
    for k in order:
        n = count(f"[{units[k].label}]\n" + docs[units[k].doc].text[units[k].start:units[k].end]) + 2
        if used + n > budget_tokens:
            continue
        chosen.append(k)
        used += n
    if not chosen:
        return None
    chosen.sort(key=lambda k: (units[k].doc, units[k].start))
    pieces: list = []
    for i, k in enumerate(chosen):
        u = units[k]
        pieces += [("\n\n" if i else "") + f"[{u.label}]\n", (docs[u.doc], u.start, u.end)]
    labels = [units[k].label for k in sorted(chosen, key=lambda k: -scores[k])[:5]]
    more = f" and {len(chosen) - 5} more" if len(chosen) > 5 else ""
    line = (f"did not fit ({doc_tokens:,} document tokens, room for {budget_tokens:,}): read {len(chosen)} of "
            f"{len(units)} {kind} chosen by relevance to the question, about {used:,} tokens "
            f"(best: {'; '.join(labels)}{more})")
    return Reading(Document.join(pieces, doc_id="reading"), line)


# ---------------------------------------------------------------------------------------------
# Answering one input


def _cell(q: Question, answer, key: str, fallback: str | None, source=None) -> Cell:
    """The cell of an evidence-first `answer`; `source(start, end)` maps a span of what the model
    read back to the input's own documents (None: the answer's spans are already theirs)."""
    def mapped(spans) -> list[ReviewSpan]:
        out = []
        for s in spans:
            src = s if source is None else source(s.char_start, s.char_end)
            if src is not None:
                out.append(ReviewSpan(**{**src.model_dump(), "score": s.score}))
        return out

    value = answer.value
    if value is not None and source is not None:
        value = source(value.char_start, value.char_end)
    status = "error" if answer.error is not None else answer.status
    return Cell(name=q.name, question=q.text, answer=answer.text, status=status, error=answer.error,
                confidence=answer.confidence, value=value, spans=mapped(answer.spans),
                near_misses=mapped(answer.near_misses), model_text=answer.model_text,
                model_supported=answer.model_supported, fallback=fallback, finish_reason=answer.finish_reason,
                prompt_tokens=answer.prompt_tokens, cached_prompt_tokens=answer.cached_prompt_tokens,
                seconds=answer.seconds, warnings=list(getattr(answer, "warnings", []) or []),
                calibrated=getattr(answer, "calibrated", True), key=key)


def answer_questions(run, pipeline: str, docs: list[Document], questions: list[Question], keys: list[str]
                     ) -> list[Cell]:
    """The cells of `questions` over the input `docs` with the LLMRun `run`: the questions that fit
    in one batch (document KV computed once); the others over the pipeline's units (or the engine's
    retrieval fallback)."""
    return answer_inputs(run, [(pipeline, docs, questions, keys)])[0]


def answer_inputs(run, inputs: list[tuple[str, list[Document], list[Question], list[str]]]) -> list[list[Cell]]:
    """`answer_questions` for several inputs, each (pipeline, docs, questions, keys): the questions
    that fit, of every input, go to the engine in one batch (`LLMRun.ask_many`: the inputs' KV
    computed together, the decodes batched across them); the others, input by input, over their
    pipeline's units. One list of cells per input."""
    from pipelines.llm import INSTRUCTIONS, QUESTION, EngineUnavailable
    from pipelines.llm.run import join_documents

    try:
        llm = run.engine()
    except EngineUnavailable as exc:
        return [[Cell(name=q.name, question=q.text, answer="", error=str(exc), key=k)
                 for q, k in zip(questions, keys, strict=True)] for _, _, questions, keys in inputs]
    count = lambda s: len(llm.encode(s, add_special_tokens=False))  # noqa: E731
    fixed = len(llm.encode(INSTRUCTIONS)) + MAX_TOKENS + 8
    plans = []  # per input: (doc_n, fit, long)
    for _, docs, questions, _ in inputs:
        doc_n = count(join_documents(docs).text)
        fit, long = [], []
        for i, q in enumerate(questions):
            room = llm.max_model_len - fixed - count(QUESTION.format(question=q.text))
            (fit if doc_n <= room else long).append((i, room))
        plans.append((doc_n, fit, long))
    cells: list[list[Cell | None]] = [[None] * len(questions) for _, _, questions, _ in inputs]
    asked = [k for k, (_, fit, _) in enumerate(plans) if fit]
    if asked:
        answers = run.ask_many([(inputs[k][1], [inputs[k][2][i].text for i, _ in plans[k][1]]) for k in asked],
                               max_tokens=MAX_TOKENS)
        for k, got in zip(asked, answers, strict=True):
            _, _, questions, keys = inputs[k]
            for (i, _), a in zip(plans[k][1], got, strict=True):
                cells[k][i] = _cell(questions[i], a, keys[i], a.fallback)
    for k, (pipeline, docs, questions, keys) in enumerate(inputs):
        doc_n, _, long = plans[k]
        if not long:
            continue
        try:
            units = structure_units(pipeline, docs)
            unit_error = None
        except Exception as exc:  # noqa: BLE001 - the engine's fallback still serves the question
            units, unit_error = [], f"{type(exc).__name__}: {str(exc)[:120]}"
        for i, room in long:
            cells[k][i] = _long_cell(run, pipeline, docs, questions[i], keys[i], room, count, doc_n, units,
                                     unit_error)
    return [[c for c in row if c is not None] for row in cells]


def _long_cell(run, pipeline: str, docs: list[Document], q: Question, key: str, room: int, count, doc_n: int,
               units: list[Unit], unit_error: str | None) -> Cell:
    """A question over an input longer than the context: over the pipeline's `units` chosen for it,
    or the engine's retrieval fallback when the pipeline gives none (`unit_error`: why not)."""
    kind = UNIT_KINDS.get(pipeline, "units")
    reading = build_reading(q.text, units, docs, room, count, doc_n, kind) if units else None
    if reading is None:
        (a,) = run.ask(docs, [q.text], fallback="retrieval", max_tokens=MAX_TOKENS)
        why = f"no {kind} from the {pipeline} pipeline" + (f" ({unit_error})" if unit_error else "")
        line = f"{a.fallback} ({why}; the engine's retrieval chose)" if a.fallback else a.fallback
        return _cell(q, a, key, line)
    (a,) = run.ask([reading.doc], [q.text], fallback="retrieval", max_tokens=MAX_TOKENS)
    return _cell(q, a, key, reading.line + (f"; then {a.fallback}" if a.fallback else ""),
                 source=reading.joined.to_source)


def row_path(out_dir: Path, pipeline: str, input_id: str) -> Path:
    from app.batch import output_name  # a name over the file system's limit is cut the same way

    return Path(out_dir) / ROWS_DIR / pipeline / output_name(input_id)


def read_row(path: Path) -> RowFile | None:
    """A row file, or None when it is missing, unreadable or of another schema."""
    try:
        return RowFile.model_validate_json(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


@dataclass
class RowResult:
    row: RowFile
    computed: int
    reused: int
    seconds: float
    batched_with: int = 0  # other inputs whose questions went to the engine in the same call


EMPTY = "the model gave an empty answer"  # the model's own outcome: kept like an answer


def _kept(old: RowFile | None, sha: str) -> dict[str, Cell]:
    """The cells of an earlier row file that can be reused: same input hash, and an answer (or the
    model's empty answer, which the same model gives again); a cell whose engine failed is not."""
    if old is None or old.input_sha256 != sha:
        return {}
    return {c.key: c for c in old.cells if c.error is None or c.error == EMPTY}


def up_to_date(pipeline: str, inp, questions: list[Question], model: str, out_path: Path) -> bool:
    """Whether the row file already holds every asked cell for this input (same keys, no error)."""
    old = read_row(out_path)
    if old is None or old.error is not None:
        return False
    kept = _kept(old, inp.content_sha256())
    return all(cell_key(old.input_sha256, q.text, model) in kept for q in questions)


def compute_row(pipeline: str, inp, questions: list[Question], run, old: RowFile | None = None,
                limits=None) -> RowResult:
    """The row of one input, writing nothing: cells of `old` (its earlier row file) under the same
    key are kept, the others computed (in one call to the engine where the input fits). A file
    that cannot be read is a row with its error (IngestError/OSError are not raised)."""
    return compute_rows([(pipeline, inp, questions, old)], run, limits)[0]


def compute_rows(entries: list[tuple[str, Any, list[Question], RowFile | None]], run, limits=None) -> list[RowResult]:
    """`compute_row` for several inputs, each (pipeline, input, questions, old row file): the cells
    to compute, of every input, go to the engine together (`answer_inputs`). Each RowResult's
    seconds is the input's own reading plus the whole shared call."""
    from pipelines.registry import get_pipeline

    done: list[RowResult | None] = [None] * len(entries)
    pending = []  # (index, base, sha, keys, kept, todo, docs, seconds so far)
    for n, (pipeline, inp, questions, old) in enumerate(entries):
        t0 = time.perf_counter()
        model = run.settings.describe()
        base = {"input_id": inp.input_id, "source_pipeline": pipeline, "files": [p.name for p in inp.paths],
                "model": model}
        try:
            sha = inp.content_sha256()
        except OSError as exc:
            done[n] = RowResult(RowFile(**base, input_sha256="", error=f"{inp.input_id}: {exc.strerror or exc}"), 0,
                                0, time.perf_counter() - t0)
            continue
        keys = [cell_key(sha, q.text, model) for q in questions]
        kept = _kept(old, sha)
        todo = [(q, k) for q, k in zip(questions, keys, strict=True) if k not in kept]
        try:
            docs = get_pipeline(pipeline).load(inp, limits)
        except (IngestError, OSError) as exc:
            reason = str(exc) if isinstance(exc, IngestError) else f"{inp.input_id}: {exc.strerror or exc}"
            done[n] = RowResult(RowFile(**base, input_sha256=sha, error=reason), 0, 0, time.perf_counter() - t0)
            continue
        pending.append((n, base, sha, keys, kept, todo, docs, time.perf_counter() - t0))
    asked = [p for p in pending if p[5]]
    t1 = time.perf_counter()
    new_cells = answer_inputs(run, [(entries[n][0], docs, [q for q, _ in todo], [k for _, k in todo])
                                    for n, _, _, _, _, todo, docs, _ in asked]) if asked else []
    call_s = time.perf_counter() - t1
    new_by_n = {p[0]: cells for p, cells in zip(asked, new_cells, strict=True)}
    for n, base, sha, keys, kept, _todo, docs, own_s in pending:
        new = new_by_n.get(n, [])
        by_key = {**kept, **{c.key: c for c in new}}
        # the asked questions first, in their order, then cells of earlier questions kept for later runs
        cells = [by_key[k] for k in keys] + [c for k, c in kept.items() if k not in keys]
        row = RowFile(**base, input_sha256=sha, documents=[d.info() for d in docs], cells=cells)
        done[n] = RowResult(row, len(new), len(keys) - len(new), own_s + (call_s if n in new_by_n else 0.0),
                            len(asked) - 1 if n in new_by_n else 0)
    return [r for r in done if r is not None]


def review_input(pipeline: str, inp, questions: list[Question], run, out_path: Path, *, force: bool = False,
                 limits=None) -> RowResult:
    """compute_row with the input's row file at `out_path` read first (unless `force`) and the new
    row written there atomically."""
    return review_inputs(pipeline, [(inp, out_path)], questions, run, force=force, limits=limits)[0]


def review_inputs(pipeline: str, items: list[tuple[Any, Path]], questions: list[Question], run, *,
                  force: bool = False, limits=None) -> list[RowResult]:
    """review_input for several (input, row file) at once: their questions go to the engine
    together (`compute_rows`), each row written atomically to its file."""
    entries = [(pipeline, inp, questions, None if force else read_row(path)) for inp, path in items]
    results = compute_rows(entries, run, limits)
    for (_, path), res in zip(items, results, strict=True):
        write_atomic(path, res.row.model_dump_json(indent=2) + "\n")
    return results


# ---------------------------------------------------------------------------------------------
# The batch: tasks, one task's work, the table


def review_tasks(tasks: list, out_dir: Path, questions: list[Question]) -> list:
    """The batch's tasks (app.batch.Task) turned into review rows: each asks `questions` and writes
    its row file under DIR/review/."""
    qs = tuple(f"{q.name}\t{q.text}" for q in questions)
    return [replace(t, questions=qs, output=row_path(out_dir, t.pipeline, t.input.input_id)) for t in tasks]


def task_questions(task) -> list[Question]:
    return [Question(*q.split("\t", 1)) for q in task.questions]


def check_review(task):
    """The batch's up-to-date check for a review row (app.batch.check_task): a "skipped" Outcome
    when its row file holds every asked cell, None to compute it."""
    from app.batch import Outcome

    if task.force:
        return None
    try:
        if not up_to_date(task.pipeline, task.input, task_questions(task), task.llm.settings.describe(), task.output):
            return None
    except OSError:
        return None  # compute reports it
    n = len(task.questions)
    return Outcome(task.input.input_id, task.pipeline, "skipped", output=str(task.output),
                   files=[p.name for p in task.input.paths], summary=f"{n} cells up to date")


def compute_review(task):
    """A review row's work, writing nothing (app.batch.compute_task): the row file's text and the
    Outcome: ok, or failed when the input cannot be read or no asked cell has an answer (its row
    file is still written, with the errors)."""
    return compute_reviews([task])[0]


def compute_reviews(tasks: list) -> list:
    """`compute_review` for several review rows at once (app.batch.TaskWork.compute_many): their
    questions go to the engine together (`compute_rows`). Rows of different LLM settings are
    computed apart. One Computed per task, in order."""
    from app.batch import Computed

    by_llm: dict = {}
    for n, task in enumerate(tasks):
        by_llm.setdefault(task.llm, []).append(n)
    out: list = [None] * len(tasks)
    for group in by_llm.values():
        for n, (outcome, text) in zip(group, _reviews([tasks[n] for n in group]), strict=True):
            out[n] = Computed(outcome, text)
    return out


def _reviews(tasks: list) -> list[tuple]:
    """(Outcome, row text or None) per task; the tasks share one LLMRun (their llm settings are equal)."""
    from app.batch import Outcome
    from pipelines.llm import LLMRun

    t0 = time.perf_counter()
    outs = [Outcome(t.input.input_id, t.pipeline, "failed", files=[p.name for p in t.input.paths]) for t in tasks]
    texts: list[str | None] = [None] * len(tasks)
    try:
        first = tasks[0].llm
        run = LLMRun(first.mode, first.settings, budget_s=first.budget_s)
        entries = [(t.pipeline, t.input, task_questions(t), None if t.force else read_row(t.output)) for t in tasks]
        results = compute_rows(entries, run)
    except Exception as exc:  # noqa: BLE001 - a bug must not stop the batch
        for t, out in zip(tasks, outs, strict=True):
            out.reason = f"{t.input.input_id}: internal error ({type(exc).__name__}: {str(exc)[:200]})"
            out.traceback = traceback.format_exc(limit=8)
            out.seconds = round(time.perf_counter() - t0, 4)
        return list(zip(outs, texts, strict=True))
    for n, (task, out, res) in enumerate(zip(tasks, outs, results, strict=True)):
        row = res.row
        asked = [row.cell(q.text) for q in task_questions(task)]
        errors = [c.error for c in asked if c is not None and c.error]
        if row.error:
            out.reason = row.error
        elif errors and len(errors) == len(asked):
            out.reason = f"{task.input.input_id}: no answer ({errors[0]})"
            texts[n] = row.model_dump_json(indent=2) + "\n"
        else:
            out.status = "ok"
            out.summary = f"{res.computed} cells computed, {res.reused} reused"
            if res.batched_with:
                k = res.batched_with
                out.summary += f" (in one engine batch with {k} other input{'s' if k > 1 else ''})"
            if errors:
                out.note = f"{len(errors)} of {len(asked)} cells without an answer: {errors[0]}"
            texts[n] = row.model_dump_json(indent=2) + "\n"
        out.seconds = round(res.seconds, 4)
    return list(zip(outs, texts, strict=True))


def review_task(task):
    """check_review, then the row computed and written atomically: a whole review row's work as an
    Outcome (for a batch runner that calls one function per task)."""
    done = check_review(task)
    if done is not None:
        return done
    ((out, text),) = _reviews([task])
    if text is not None:
        write_atomic(task.output, text)
        out.output = str(task.output)
    return out


def build_table(rows: list[Row], questions: list[Question], model: str, paths: Sequence[Path] = ()) -> ReviewTable:
    """The table of `rows` for `questions` (each row's cells of those questions, in their order; a
    question a row has no cell for is left out of that row)."""
    try:
        sha = input_sha256(sorted(set(paths), key=lambda p: p.name)) if paths else ""
    except OSError:
        sha = ""
    out_rows = []
    for r in rows:
        cells = [c for c in (r.cell(q.text) for q in questions) if c is not None]
        cells = [c.model_copy(update={"name": q.name}) for c in cells for q in questions if q.text == c.question]
        out_rows.append(Row(input_id=r.input_id, source_pipeline=r.source_pipeline, files=r.files,
                            input_sha256=r.input_sha256, documents=r.documents, error=r.error, cells=cells))
    return ReviewTable(input_sha256=sha, model=model, questions=[QuestionOut(name=q.name, question=q.text) for q in questions],
                       rows=out_rows)


def table_from_tasks(tasks: list, questions: list[Question], model: str, outcomes: Sequence = ()) -> ReviewTable:
    """The table of a review batch from its row files: a row file of another input hash is not
    used; an input the batch could not read is a row with the batch's reason; one without a row
    file, a row with the error 'not run'."""
    failed = {(o.pipeline, o.input_id): o.reason for o in outcomes if o.status == "failed"}
    rows: list[Row] = []
    for t in sorted(tasks, key=lambda t: (t.pipeline, t.input.input_id)):
        files = [p.name for p in t.input.paths]
        try:
            sha = t.input.content_sha256()
        except OSError:
            sha = ""
        row = read_row(t.output)
        if row is not None and row.input_sha256 != sha:
            row = None
        reason = failed.get((t.pipeline, t.input.input_id))
        if row is None:
            row = RowFile(input_id=t.input.input_id, source_pipeline=t.pipeline, files=files, input_sha256=sha,
                          error=reason or f"{t.input.input_id}: not run (the batch stopped before it)")
        elif reason and row.error is None and not any(c.error is None for c in row.cells):
            row = row.model_copy(update={"error": reason})
        rows.append(row)
    return build_table(rows, questions, model, [p for t in tasks for p in t.input.paths])


# ---------------------------------------------------------------------------------------------
# CSV and XLSX

_FORMULA = ("=", "+", "-", "@", "\t", "\r")


def _safe(text: str) -> str:
    """A cell a spreadsheet will not run as a formula (a leading = + - @ gets a quote)."""
    return "'" + text if text.startswith(_FORMULA) else text


def cell_text(c: Cell | None) -> str:
    """The grid's text for a cell: the answer ("[low confidence] …" when `low_confidence`, so a
    reviewer sees which to check), "not stated in the document", or the error."""
    if c is None:
        return ""
    if c.error is not None:
        return f"(no answer: {c.error})"
    warn = "[check: the document imitates a Q&A] " if c.warnings else ""
    if low_confidence(c):
        return f"{warn}[low confidence] {c.answer}"
    return warn + c.answer


def span_text(s: ReviewSpan, names: dict[str, str]) -> str:
    quote = " ".join(s.text.split())
    quote = quote if len(quote) <= 300 else quote[:297] + "…"
    return f"{names.get(s.doc_id, s.doc_id)} p.{s.page} [{s.char_start}:{s.char_end}] ({s.score:.0%}): “{quote}”"


def grid_rows(table: ReviewTable) -> list[list[str]]:
    """The Answers grid: header, then one line per input: document, files, error, one answer per question."""
    out = [["document", "files", "error", *[q.name for q in table.questions]]]
    for r in table.rows:
        out.append([r.input_id, "; ".join(r.files), r.error or "",
                    *[cell_text(r.cell(q.question)) for q in table.questions]])
    return out


SOURCE_HEADER = ["document", "column", "question", "answer", "status", "error", "confidence", "page", "source 1",
                 "source 2", "source 3", "what was read", "model's text", "model's text carried by the quotes"]


def source_rows(table: ReviewTable) -> list[list]:
    """The Sources sheet: one line per cell with its status and confidence, the passages it quotes
    (the near misses when not stated), what was read and the model's own text."""
    out: list[list] = [list(SOURCE_HEADER)]
    for r in table.rows:
        names = {d.doc_id: d.source_name for d in r.documents}
        for q in table.questions:
            c = r.cell(q.question)
            if c is None:
                continue
            spans = [span_text(s, names) for s in (c.spans or c.near_misses)[:3]]
            out.append([r.input_id, q.name, q.question, c.answer, c.status, c.error or "",
                        "" if c.confidence is None else c.confidence,
                        c.spans[0].page if c.spans else "", *(spans + [""] * (3 - len(spans))),
                        c.fallback or "whole input", c.model_text or "",
                        "" if c.model_supported is None else ("yes" if c.model_supported else "no")])
    return out


def to_csv(rows: list[list]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\r\n")
    for r in rows:
        w.writerow([_safe(v) if isinstance(v, str) else v for v in r])
    return buf.getvalue()


def to_xlsx(table: ReviewTable) -> bytes:
    """The workbook: Answers (the grid; the first source of each answer as the cell's comment),
    Sources (one line per cell), Questions (name, question). Every text cell is stored as text,
    never as a formula."""
    from openpyxl import Workbook
    from openpyxl.comments import Comment
    from openpyxl.styles import Alignment, Font

    wb = Workbook()
    ws = wb.active
    ws.title = "Answers"

    def put(sheet, r, c, value, wrap=False):
        cell = sheet.cell(row=r, column=c, value=value)
        if isinstance(value, str):
            cell.data_type = "s"  # "=…" from a document stays text
        if wrap:
            cell.alignment = Alignment(wrap_text=True, vertical="top")
        return cell

    grid = grid_rows(table)
    for ci, head in enumerate(grid[0], 1):
        put(ws, 1, ci, head).font = Font(bold=True)
    for ri, (r, line) in enumerate(zip(table.rows, grid[1:], strict=True), 2):
        names = {d.doc_id: d.source_name for d in r.documents}
        for ci, value in enumerate(line, 1):
            cell = put(ws, ri, ci, value, wrap=ci > 3)
            if ci > 3:
                c = r.cell(table.questions[ci - 4].question)
                if c is not None and c.spans:
                    note = span_text(c.spans[0], names) + (f"\nconfidence {c.confidence:.0%}" if c.confidence is not None else "")
                    if c.fallback:
                        note += "\n" + c.fallback
                    cell.comment = Comment(note[:2000], "longdoc")
    for ci, q in enumerate(table.questions, 4):
        ws.cell(row=1, column=ci).comment = Comment(q.question[:2000], "longdoc")
    ws.freeze_panes = "B2"
    widths = {1: 28, 2: 28, 3: 24}
    for ci in range(1, len(grid[0]) + 1):
        ws.column_dimensions[ws.cell(row=1, column=ci).column_letter].width = widths.get(ci, 48)
    src = wb.create_sheet("Sources")
    for ri, line in enumerate(source_rows(table), 1):
        for ci, value in enumerate(line, 1):
            put(src, ri, ci, value, wrap=ri > 1 and ci in (3, 4, 9, 10, 11, 12, 13)).font = Font(bold=ri == 1)
    src.freeze_panes = "C2"
    qs = wb.create_sheet("Questions")
    put(qs, 1, 1, "column").font = Font(bold=True)
    put(qs, 1, 2, "question").font = Font(bold=True)
    for ri, q in enumerate(table.questions, 2):
        put(qs, ri, 1, q.name)
        put(qs, ri, 2, q.question)
    buf = io.BytesIO()
    wb.save(buf)
    return buf.getvalue()


def write_table(out_dir: Path, table: ReviewTable) -> list[Path]:
    """review.json, review.csv, review-sources.csv and review.xlsx in `out_dir`, each atomically."""
    out_dir = Path(out_dir)
    paths = [write_atomic(out_dir / "review.json", table.model_dump_json(indent=2) + "\n"),
             write_atomic(out_dir / "review.csv", to_csv(grid_rows(table))),
             write_atomic(out_dir / "review-sources.csv", to_csv(source_rows(table)))]
    paths.append(_write_bytes_atomic(out_dir / "review.xlsx", to_xlsx(table)))
    return paths


def _write_bytes_atomic(path: Path, data: bytes) -> Path:
    """write_atomic for bytes: a temporary file beside the target, fsynced, renamed over it."""
    import os

    from app.export import _create_temp

    fd, tmp = _create_temp(path.parent, path.name)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


# Inputs a batch worker takes at once for a review table (`longdoc batch --group`), by device:
# BENCHMARKS.md, "Review tables: inputs grouped per worker".
DEFAULT_GROUP = {"cpu": 1, "cuda": 8}


def default_group(settings) -> int:
    """How many review rows a worker computes together on the settings' device (EngineSettings)."""
    return DEFAULT_GROUP.get(settings.device_kind(), 1)
