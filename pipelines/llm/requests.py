"""The request API: a batch of questions that share one `Document`, submitted together
(`ask_documents`: several documents, each with its questions, in one batch).

`ask_document(llm, doc, questions, ...)` lays out every prompt as instructions + document +
question, submits the questions together so the scheduler batches them, and computes the
document's KV once (`strategy`: "auto" — `resolve_strategy`: "prefix", measured faster;
"placement" — `LLM.generate_with_document_batch`, the document computed on its own and placed
behind the instructions; "prefix" — `LLM.generate_shared`:
[instructions + document] prefilled once and its blocks shared by reference by every question,
each question computing only the head's last partial block and itself; BENCHMARKS.md, "The LLM
layer", measures both). Each `Item` holds the answer's text, finish reason and token ids,
optionally the token log-probabilities (`LLM.score`) and the document spans the answer attends to
(`pipelines.llm.spans.attribute_answer`), or an error of its own.

Around the batch: `on_progress(Progress)` after every engine step (tokens done of tokens total,
elapsed, an estimate of the time left); `cancel` (a threading.Event) and `budget` (seconds and/or
tokens) checked between engine steps — the finished items are kept, the others carry the reason;
an item whose prompt does not fit the context gets its error (or, with `fallback`, goes through
the engine's fallback with the pipelines' text tools and carries its report) and the rest of the
batch goes on.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from pipelines.documents import Document
from pipelines.llm.settings import engine_lock
from pipelines.llm.spans import AttributedSpan, attribute_answers

INSTRUCTIONS = "Read the document and answer the question after it.\n\nDocument:\n"
QUESTION = "\n\nQuestion: {question}\nAnswer:"
STOP = ("\nQuestion:", "\nAnswer:")  # a base model runs on into the next "Question:"/"Answer:" of the format
STRATEGIES = ("auto", "placement", "prefix")
# with a model that has a chat template, the question asks for the short answer the evidence check reads
CHAT_QUESTION = "\n\nQuestion: {question}\nAnswer in a few words, as the document says it."
_DOC_MARK, _Q_MARK = "\x00longdoc-document\x00", "\x00longdoc-question\x00"
ATTRIBUTE_BATCH = 32  # answers attributed per engine call (LLM.attribute_many), progress and cancel between


def resolve_strategy(strategy: str = "auto") -> str:
    """"auto" is "prefix" (`LLM.generate_shared`: the head's blocks shared by reference), measured
    faster than placement on both devices: on the H200 4.7x (Llama-3-8B shape) and 1.8x (Gemma 3
    270M) for 30 questions over a 20K-token document and 3.7x for 60 documents x 5 questions
    (BENCHMARKS.md, "Batched requests over one document on the H200"); on this CPU 5-16% without
    attribution and 2.1x with it, since the attribution pass then reads the document's KV from the
    prefix cache instead of recomputing it per answer ("The LLM layer"). With a disk store
    (`--cache-dir`) the head is written up to its cut, so a later run takes the whole document
    from disk. "placement" stays available (a document's KV placed at any offset and kept whole in
    the document store)."""
    return "prefix" if strategy == "auto" else strategy


@dataclass(frozen=True)
class Budget:
    """Stop the batch after `seconds` of wall time or `tokens` engine tokens (prompt tokens put in
    place plus tokens generated), whichever comes first; None: no limit."""

    seconds: float | None = None
    tokens: int | None = None


@dataclass(frozen=True)
class Progress:
    """tokens_done of tokens_total (prompt tokens in place and tokens generated; a finished answer
    counts its whole max_tokens), seconds elapsed, items finished of items; `phase` names a later
    pass over the answers (reading their evidence), whose units are the items."""

    tokens_done: int
    tokens_total: int
    elapsed_s: float
    items_done: int
    items_total: int
    phase: str = ""  # "" for the model's pass; otherwise what is being done (its units are the items)

    @property
    def fraction(self) -> float:
        return min(1.0, self.tokens_done / self.tokens_total) if self.tokens_total else 1.0

    @property
    def eta_s(self) -> float | None:
        """Seconds left at the rate so far; None before any work is done."""
        if self.tokens_done <= 0:
            return None
        return self.elapsed_s * max(0, self.tokens_total - self.tokens_done) / self.tokens_done

    def describe(self) -> str:
        eta = self.eta_s
        left = "" if eta is None else f", about {eta:.0f} s left"
        if self.phase:
            return f"{self.phase}: {self.items_done}/{self.items_total} answers, {self.elapsed_s:.0f} s{left}"
        return (f"{self.tokens_done:,}/{self.tokens_total:,} tokens, {self.items_done}/{self.items_total} answers, "
                f"{self.elapsed_s:.0f} s{left}")


@dataclass
class Item:
    """One question's outcome. error: one line when it has no answer (context too long, cache full,
    cancelled, budget exceeded); fallback: the engine's FallbackReport when its prompt did not fit
    and a fallback served it."""

    question: str
    text: str = ""
    finish_reason: str | None = None
    token_ids: list[int] = field(default_factory=list)
    logprobs: list[float] | None = None
    spans: list[AttributedSpan] = field(default_factory=list)
    error: str | None = None
    fallback: Any = None
    metrics: dict = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.error is None

    def to_dict(self) -> dict:
        return {"question": self.question, "text": self.text, "finish_reason": self.finish_reason,
                "logprobs": self.logprobs, "spans": [s.to_dict() for s in self.spans], "error": self.error,
                "fallback": self.fallback.to_dict() if self.fallback is not None else None,
                "metrics": self.metrics}


@dataclass
class BatchResult:
    """status: "ok", "cancelled" or "budget_exceeded" (message says what stopped and what was kept).
    reuse: what the engine reused for this batch (documents computed / loaded, prompt tokens taken
    from the prefix cache)."""

    items: list[Item]
    strategy: str
    status: str = "ok"
    message: str | None = None
    seconds: float = 0.0
    reuse: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {"strategy": self.strategy, "status": self.status, "message": self.message,
                "seconds": round(self.seconds, 3), "reuse": self.reuse, "items": [i.to_dict() for i in self.items]}


class _Stop(Exception):
    pass


class _Tracker:
    """Progress over the batch's phases, monotone; checks cancellation and the budget."""

    def __init__(self, total: int, items: int, on_progress: Callable[[Progress], None] | None,
                 cancel: threading.Event | None, budget: Budget | None) -> None:
        self.total, self.items, self.on_progress = max(total, 1), items, on_progress
        self.cancel, self.budget = cancel, budget or Budget()
        self.t0 = time.perf_counter()
        self.base = self.done = self.items_done = 0
        self.status, self.message = "ok", None

    def report(self, phase_done: int, items_done: int | None = None) -> bool:
        """Record progress; True when the batch must stop (cancelled or over budget)."""
        self.done = max(self.done, min(self.total, self.base + phase_done))
        if items_done is not None:
            self.items_done = max(self.items_done, items_done)
        elapsed = time.perf_counter() - self.t0
        if self.on_progress is not None:
            self.on_progress(Progress(self.done, self.total, elapsed, self.items_done, self.items))
        if self.status != "ok":
            return True
        if self.cancel is not None and self.cancel.is_set():
            self.status, self.message = "cancelled", f"cancelled after {elapsed:.1f} s"
        elif self.budget.seconds is not None and elapsed > self.budget.seconds:
            self.status = "budget_exceeded"
            self.message = f"time budget of {self.budget.seconds:g} s exceeded after {elapsed:.1f} s"
        elif self.budget.tokens is not None and self.done > self.budget.tokens:
            self.status = "budget_exceeded"
            self.message = f"token budget of {self.budget.tokens:,} exceeded at {self.done:,} tokens"
        return self.status != "ok"

    def phase_end(self, work: int) -> None:
        self.base += work

    def finish(self, items_done: int) -> None:
        if self.status == "ok":
            self.base, self.done = self.total, self.total
        self.items_done = items_done
        if self.on_progress is not None:
            self.on_progress(Progress(self.done, self.total, time.perf_counter() - self.t0, items_done, self.items))


def prompt_frame(llm, instructions: str = INSTRUCTIONS, question_template: str = QUESTION) -> tuple[str, str]:
    """The (instructions, question_template) that ask prompts use with this model. A model without
    a chat template (a base model such as the default Gemma 3 270M) gets them as given: completion
    prompts. One with a template gets one user turn holding instructions + document + question,
    rendered through it with the generation prompt after, and cut around the document: the head
    (the template's opening and the instructions) and each question's tail (the question, the turn's
    end, the reply's opening), so the document's KV is still computed once for all its questions.
    The default question template becomes `CHAT_QUESTION`; a BOS the template writes is dropped when
    the tokenizer adds its own."""
    tok = getattr(llm, "tokenizer", None)
    template = getattr(tok, "chat_template", None)
    if not template:
        return instructions, question_template
    q = CHAT_QUESTION if question_template == QUESTION else question_template
    rendered = tok.apply_chat_template([{"role": "user", "content": instructions + _DOC_MARK + _Q_MARK}],
                                       add_generation_prompt=True)
    if rendered.count(_DOC_MARK) != 1 or rendered.count(_Q_MARK) != 1:
        return instructions, question_template  # a template that rewrites its content: plain prompts
    head, rest = rendered.split(_DOC_MARK)
    between, tail = rest.split(_Q_MARK)
    bos = getattr(tok, "bos_token", None)
    if bos and head.startswith(bos):
        ids = llm.encode("a")
        if ids and ids[0] == tok.token_to_id(bos):
            head = head[len(bos):]
    return head, between + q + tail.replace("{", "{{").replace("}", "}}")


def ask_document(llm, doc: Document, questions: Sequence[str], *, instructions: str = INSTRUCTIONS,
                 question_template: str = QUESTION, max_tokens: int = 64, stop: Sequence[str] = STOP,
                 strategy: str = "auto", attribute: bool = False,
                 candidates: Sequence[tuple[int, int]] | None = None, top_k: int = 3, logprobs: bool = False,
                 on_progress: Callable[[Progress], None] | None = None, cancel: threading.Event | None = None,
                 budget: Budget | None = None, fallback=None) -> BatchResult:
    """Answer `questions` over `doc` with `llm` (an engine.LLM) in one batch; see the module docstring.
    Greedy decoding. attribute: each answer's top_k spans among `candidates` (character ranges of
    doc.text; default its sentences). fallback: an engine FallbackPolicy for items whose prompt does
    not fit (None: such items get the context error)."""
    return ask_documents(llm, [(doc, questions)], instructions=instructions, question_template=question_template,
                         max_tokens=max_tokens, stop=stop, strategy=strategy, attribute=attribute,
                         candidates=[candidates], top_k=top_k, logprobs=logprobs, on_progress=on_progress,
                         cancel=cancel, budget=budget, fallback=fallback)[0]


def ask_documents(llm, jobs: Sequence[tuple[Document, Sequence[str]]], *, instructions: str = INSTRUCTIONS,
                  question_template: str = QUESTION, max_tokens: int = 64, stop: Sequence[str] = STOP,
                  strategy: str = "auto", attribute: bool = False,
                  candidates: Sequence[Sequence[tuple[int, int]] | None] | None = None, top_k: int = 3,
                  logprobs: bool = False, on_progress: Callable[[Progress], None] | None = None,
                  cancel: threading.Event | None = None, budget: Budget | None = None,
                  fallback=None) -> list[BatchResult]:
    """`ask_document` for several documents at once, each with its questions: one BatchResult per
    (document, questions) job, in order. With the "prefix" strategy every question that fits, of
    every document, is submitted in one `LLM.generate_shared_batch`, so the documents' heads are
    prefilled together and all the decodes are batched (a review table's worker hands its inputs in
    here together); "placement" runs the documents one after the other. Progress, cancellation and
    the budget span the whole call; each result's status, message, seconds and `reuse` are the
    call's, except `reuse`, which the first result carries (the others' counts are 0), so results
    summed count it once. candidates: one entry per job (None: the document's sentences)."""
    with engine_lock(llm):
        return _ask_documents(llm, list(jobs), instructions, question_template, max_tokens, stop, strategy,
                              attribute, candidates, top_k, logprobs, on_progress, cancel, budget, fallback)


@dataclass
class _Job:
    """One document's part of a call: its items, their suffixes, which fit and which go long."""

    doc: Document
    items: list[Item]
    suffixes: list[str]
    head_n: int  # the instructions' and the document's tokens
    fit: list[int] = field(default_factory=list)
    long: list[int] = field(default_factory=list)
    candidates: Sequence[tuple[int, int]] | None = None


def _ask_documents(llm, jobs, instructions, question_template, max_tokens, stop, strategy, attribute,
                   candidates, top_k, logprobs, on_progress, cancel, budget, fallback) -> list[BatchResult]:
    from engine import ContextLengthError, EngineError, SamplingParams

    if strategy not in STRATEGIES:
        raise ValueError(f"strategy must be one of {', '.join(STRATEGIES)}, not {strategy!r}")
    strategy = resolve_strategy(strategy)
    params = SamplingParams(max_tokens=max_tokens, stop=list(stop))
    instr_n = len(llm.encode(instructions))
    cands = list(candidates) if candidates is not None else [None] * len(jobs)
    if len(cands) != len(jobs):
        raise ValueError(f"candidates: {len(cands)} entries for {len(jobs)} documents")
    work_list: list[_Job] = []
    work = 0
    for (doc, questions), cand in zip(jobs, cands, strict=True):
        doc_n = len(llm.encode(doc.text, add_special_tokens=False))
        job = _Job(doc, [Item(q) for q in questions], [question_template.format(question=q) for q in questions],
                   instr_n + doc_n, candidates=cand)
        for i, suf in enumerate(job.suffixes):
            n = job.head_n + len(llm.encode(suf, add_special_tokens=False))
            job.items[i].metrics["prompt_tokens"] = n
            try:
                llm.check_len(n)
                job.fit.append(i)
            except EngineError as exc:
                if fallback is not None and isinstance(exc, ContextLengthError):
                    job.long.append(i)
                else:
                    job.items[i].error = str(exc)
        work += sum(job.items[i].metrics["prompt_tokens"] + max_tokens for i in job.fit)
        work += len(job.long) * (doc_n + max_tokens)
        if strategy == "prefix" and job.fit:
            work += job.head_n
        if attribute or logprobs:
            work += (int(attribute) + int(logprobs)) * len(job.fit) * (job.head_n + max_tokens)
        work_list.append(job)
    all_items = [it for job in work_list for it in job.items]
    track = _Tracker(work, len(all_items), on_progress, cancel, budget)
    before = _reuse(llm)
    track.report(0)
    fitting = [job for job in work_list if job.fit]
    if fitting:
        _run_fit(llm, fitting, instructions, params, strategy, track, all_items)
    for job in work_list:
        for i in job.long:
            if track.report(0):
                break
            _run_long(llm, job.doc, job.items[i], instructions, job.suffixes[i], params, fallback)
            track.phase_end(job.head_n - instr_n + max_tokens)
            track.report(0, sum(it.finish_reason is not None for it in all_items))
    if logprobs:
        for job in work_list:
            for i in job.fit:
                it = job.items[i]
                if it.error is None and not track.report(0) and it.token_ids:
                    it.logprobs = llm.score(instructions + job.doc.text + job.suffixes[i], it.token_ids).logprobs
                track.phase_end(job.head_n + max_tokens)
    if attribute:  # every answer of the call in a few forwards (ATTRIBUTE_BATCH answers each)
        todo = [(job, i) for job in work_list for i in job.fit]
        for lo in range(0, len(todo), ATTRIBUTE_BATCH):
            part = todo[lo:lo + ATTRIBUTE_BATCH]
            if not track.report(0):
                live = [(job, i) for job, i in part if job.items[i].error is None and job.items[i].text.strip()]
                spans = attribute_answers(llm, [(job.doc, instructions, job.suffixes[i], job.items[i].text,
                                                 job.candidates) for job, i in live], top_k)
                for (job, i), got in zip(live, spans, strict=True):
                    job.items[i].spans = got
            track.phase_end(sum(job.head_n + max_tokens for job, _ in part))
    for it in all_items:
        if it.error is None and it.finish_reason in (None, "abort"):
            it.error = f"no answer: {track.message or 'stopped'}"
    track.finish(sum(it.error is None for it in all_items))
    after = _reuse(llm)
    reuse = {k: after[k] - before[k] for k in after}
    seconds = time.perf_counter() - track.t0
    # the call's reuse goes on the first result, so results summed (StepContext.add) count it once
    return [BatchResult(job.items, strategy, track.status, _message(track, job.items), seconds,
                        dict(reuse) if k == 0 else {k2: 0 for k2 in reuse})
            for k, job in enumerate(work_list)]


def _message(track: _Tracker, items: list[Item]) -> str | None:
    if track.status == "ok":
        return None
    kept = sum(it.error is None for it in items)
    return f"{track.message}: {kept} of {len(items)} answers finished and kept"


def _reuse(llm) -> dict[str, int]:
    c = llm.doc_cache
    ps = llm.prefix.stats
    return {"documents_computed": c.computed, "documents_loaded": c.loaded,
            "prefix_hit_tokens": ps.hit_tokens + ps.cold_hit_tokens}


def _run_fit(llm, jobs: list[_Job], instructions: str, params, strategy: str, track: _Tracker,
             all_items: list[Item]) -> None:
    """The items that fit, of every job, submitted together ("prefix": one generate_shared_batch;
    "placement": one call per document). When a batch as a whole hits a cache error, its documents
    are run one at a time, then a document's items one at a time."""
    from engine import CacheFullError, EngineError, RequestCancelled

    def finished() -> int:
        return sum(it.finish_reason is not None for it in all_items)

    if strategy != "prefix" and len(jobs) > 1:
        for job in jobs:
            _run_fit(llm, [job], instructions, params, strategy, track, all_items)
        return
    heads_n = sum(job.head_n for job in jobs)
    done_before = finished()
    try:
        if strategy == "prefix":
            def on_shared(p) -> bool:
                if p.phase == "document":
                    return track.report(p.document_tokens_done)
                return track.report(heads_n + p.tokens_done, done_before + p.finished)

            groups = [(instructions + job.doc.text, [job.suffixes[i] for i in job.fit]) for job in jobs]
            outs = llm.generate_shared_batch(groups, params, on_step=on_shared)
            track.phase_end(heads_n)
        else:
            (job,) = jobs
            outs = [llm.generate_with_document_batch(
                instructions, job.doc.text, [job.suffixes[i] for i in job.fit], params,
                on_step=lambda p: track.report(p.tokens_done, done_before + p.finished))]
    except RequestCancelled:  # stopped by on_step during the heads' prefill: the tracker says why
        return
    except CacheFullError:
        if len(jobs) > 1:
            for job in jobs:
                _run_fit(llm, [job], instructions, params, strategy, track, all_items)
            return
        (job,) = jobs
        if len(job.fit) == 1:
            job.items[job.fit[0]].error = "the KV cache is too small for this request (cache full)"
            return
        for i in job.fit:
            _run_fit(llm, [replace(job, fit=[i])], instructions, params, strategy, track, all_items)
        return
    except EngineError as exc:
        for job in jobs:
            for i in job.fit:
                job.items[i].error = str(exc)
        return
    for job, job_outs in zip(jobs, outs, strict=True):
        for i, out in zip(job.fit, job_outs, strict=True):
            it = job.items[i]
            it.text, it.finish_reason, it.token_ids = out.text.strip(), out.finish_reason, list(out.token_ids)
            it.metrics.update(out.metrics, cached_prompt_tokens=out.cached_tokens,
                              prompt_tokens=len(out.prompt_token_ids))
    track.phase_end(sum(job.items[i].metrics["prompt_tokens"] + params.max_tokens for job in jobs for i in job.fit))


def _run_long(llm, doc: Document, item: Item, instructions: str, suffix: str, params, fallback) -> None:
    """An item whose prompt does not fit, through the engine's fallback with the pipelines' text tools."""
    from engine import EngineError, LongRequest
    from pipelines.text.fallback_tools import PipelineTextTools

    req = LongRequest(document=doc.text, question=suffix, instructions=instructions)
    try:
        out, report = llm.generate_long(req, params, fallback, text_tools=PipelineTextTools())
    except EngineError as exc:
        item.error = str(exc)
        return
    item.text, item.finish_reason, item.token_ids = out.text.strip(), out.finish_reason, list(out.token_ids)
    item.fallback = report
    item.metrics.update(out.metrics)
