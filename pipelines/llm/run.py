"""One pipeline run's LLM steps: which run, on which engine, what they cost, and what went wrong.

A pipeline receives an `LLMRun` (mode `off|auto|on`, engine settings, a progress callback, a
cancel event, a time budget) and wraps each of its LLM steps in `run.step(name, estimated_s)`:

    with run.step("contracts.explain", estimated_s=run.estimate_s(prompt_tokens=9000, generated=30 * 48)) as st:
        if st:                                   # None when the step does not run (mode, auto, no model)
            res = ask_document(st.llm, doc, prompts, on_progress=st.progress, cancel=run.cancel)
            st.add(res)                          # requests, tokens, reuse, per-item errors
            ...use res...

The step runs when `step_enabled` says so (off: never; on: always; auto: only a step with a
measured gain for the configured model, within the time budget). A step that cannot get an engine,
or whose engine fails (`EngineUnavailable`, any `engine.EngineError`, CUDA out of memory), is
recorded with its one-line error and the pipeline's deterministic result stays intact: the body is
left at the failing call and `run.step` swallows that error. `run.report()` is the `LLMReport` a
result carries (`llm` field): mode, model, and per step whether it ran, why not, seconds, requests,
tokens and cache reuse. With mode off no report is attached (`report()` returns None), so `--llm off`
output is exactly the rules-only output.

"Ask about this document" (`run.ask(docs, questions)`) is asked for explicitly, so it runs under
every mode, `off` included. A question the pipeline's own structure answers exactly (`structure`:
`Pipeline.structure_answerer`) is answered from it without the model. The others go to the engine
in one batch over the documents (joined when there are several, each part headed by its name; the
KV computed once and kept in the engine's caches, so a later question over the same documents does
not recompute it), and each is answered evidence first (`pipelines.llm.evidence`): the quoted
passages that hold it mapped back to their source document (page, box), the value inside the
first, the model's words only where the quotes carry them, a calibrated confidence, or "not
stated in the document" with the near misses; its time to first token and, when the documents did
not fit, what the fallback did. The answers go in the report (`answers`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from pipelines.documents import Document, Joined, Segment, SourceSpan
from pipelines.llm.modes import DEFAULT_MODEL, LLMMode, decision, step_enabled
from pipelines.llm.settings import EngineSettings, EngineUnavailable, engine_lock, get_engine

# Rough throughput of the packaged Gemma 3 270M used to estimate a step's time before running it
# (BENCHMARKS.md, "CPU: engine against transformers": 2K-token prefill in 4.5 s, ~10 tok/s decode in
# float32 on the 2-core machine; the H200 figures from "The user path on the H200").
MAX_TOKENS = 48  # the model's answer: its words are shown only where the quotes carry them, so a short one
RATES = {"cpu": {"prefill_tok_s": 450.0, "decode_steps_s": 9.0},
         "cuda": {"prefill_tok_s": 100_000.0, "decode_steps_s": 400.0}}


class StepRecord(BaseModel):
    """What one LLM step did. ran: it ran (possibly with per-item errors); reason: why it did not
    run, or what stopped it; error: the one-line failure when the engine failed."""

    model_config = ConfigDict(extra="forbid")

    step: str
    ran: bool
    reason: str = ""
    estimated_s: float | None = None
    seconds: float = 0.0
    requests: int = 0
    prompt_tokens: int = 0
    generated_tokens: int = 0
    item_errors: int = 0
    reuse: dict[str, int] = Field(default_factory=dict)
    error: str | None = None


class AnswerSpan(SourceSpan):
    """A passage an answer quotes (or a near miss): the span in its own document (page, and box for
    PDF input) and `score`, the calibrated probability that it holds the answer
    (pipelines.llm.evidence: retrieval, the model's attention and its reading of the passage)."""

    score: float


def quoted(docs: Document | Sequence[Document], span: SourceSpan, limit: int | None = None, bbox=None,
           score: float = 1.0) -> AnswerSpan:
    """`span` quoted from its own document (the one of `docs` with its doc_id; page and box read
    again from it), cut to its first `limit` characters; `bbox` overrides the box (a figure's whole
    object). The default score is a structure's: exact."""
    pool = [docs] if isinstance(docs, Document) else list(docs)
    doc = next((d for d in pool if d.doc_id == span.doc_id), pool[0] if len(pool) == 1 else None)
    end = span.char_end if limit is None else min(span.char_end, span.char_start + limit)
    src = doc.span(span.char_start, end) if doc is not None else span
    data = src.model_dump()
    if bbox is not None:
        data["bbox"] = bbox
    return AnswerSpan(**data, score=score)


def _absent(value) -> bool:
    return value is None


def _true(value) -> bool:
    return value is True


def _empty(value) -> bool:
    return not value


class Answer(BaseModel):
    """One asked question, evidence first (pipelines.llm.evidence). status "answered": `spans` are
    the quoted passages that hold the answer, best first; `value` the value asked for (a date, a
    period, an amount, a drug...) as a span inside the first; `text` what is shown: the value, the
    model's wording where the quotes carry it, or the first quote. "not_stated": no passage cleared
    the calibrated threshold; `text` says so and `near_misses` lists the best passages. "error":
    `error` says why there is no answer. route "structure": a pipeline's own structure answered it
    (the claim tree, the clause alignment, ...; `spans` quote what shows it). `confidence`: the
    calibrated probability that the shown answer is right (for not_stated, that the document does
    not hold it). `model_text` is the model's own answer, kept whether or not it is shown;
    `model_supported` whether the quotes carry it (an unsupported one is never shown as the
    answer)."""

    model_config = ConfigDict(extra="forbid")

    question: str
    text: str
    status: str = "answered"
    route: str = Field(default="evidence", description='"evidence" (passages found and read) or "structure" '
                                                        "(the pipeline's own structure answered exactly)")
    confidence: float | None = None
    kind: str = "text"
    value: SourceSpan | None = None
    error: str | None = None
    finish_reason: str | None = None
    spans: list[AnswerSpan] = Field(default_factory=list)
    near_misses: list[AnswerSpan] = Field(default_factory=list, exclude_if=_empty)
    model_text: str | None = None
    model_supported: bool | None = None
    fallback: str | None = Field(default=None, description="what the fallback did when the documents did not fit")
    fallback_report: dict | None = Field(default=None, exclude_if=_absent,
                                         description="the engine's FallbackReport when a fallback served the question")
    prompt_tokens: int = 0
    cached_prompt_tokens: int = 0
    ttft_s: float | None = None
    seconds: float = 0.0
    warnings: list[str] = Field(default_factory=list, exclude_if=_empty,
                                description="what a reader should know about the evidence (text imitating the prompt)")
    calibrated: bool = Field(default=True, exclude_if=_true,
                             description="False: `confidence` was fitted for the default model, not the one that read "
                                         "this (another --model): a ranking, not a probability")


def exact_answer(question: str, text: str, spans: list[AnswerSpan], value: SourceSpan | None = None, *,
                 status: str = "answered", kind: str = "text") -> Answer:
    """An answer from a pipeline's own structure (`Pipeline.structure_answerer`): route "structure",
    confidence 1.0, the quoted spans that show it; status "not_stated" for a label the document
    does not have."""
    return Answer(question=question, text=text, status=status, route="structure", confidence=1.0, kind=kind,
                  value=value, spans=spans)


class LLMReport(BaseModel):
    """The LLM part of a result: mode, the model (one line), each step's record, a one-line
    message when no model could be loaded, and the answers to questions asked (`--ask`)."""

    model_config = ConfigDict(extra="forbid")

    mode: str
    model: str
    steps: list[StepRecord] = Field(default_factory=list)
    message: str | None = None
    answers: list[Answer] | None = Field(default=None, exclude_if=_absent)

    def ran(self, step: str) -> bool:
        return any(s.step == step and s.ran for s in self.steps)


class StepContext:
    """Handed to a running step: the one door to the engine. Its verbs — `choose` (decide between
    labelled continuations by scoring), `generate` (greedy completions), `attention` (an answer's
    attention shares on a document's spans), `attribute` (one attribution pass over a raw prompt),
    `tokens` — each take the engine's lock, feed the run's progress callback, stop on its cancel
    where the engine allows, and count requests and tokens on the step's record; `ask_document`
    callers pass `progress` and `add` a BatchResult. `llm` is the engine handle for what the verbs
    do not cover (the ask path's `ask_document`)."""

    def __init__(self, run: LLMRun, record: StepRecord, llm) -> None:
        self.run, self.record, self.llm = run, record, llm

    @property
    def cancelled(self) -> bool:
        return self.run.cancel is not None and self.run.cancel.is_set()

    def tokens(self, text: str, special: bool = False) -> int:
        """The number of tokens of `text` (with the tokenizer's special tokens when `special`)."""
        return len(self.llm.encode(text, add_special_tokens=special))

    def choose(self, prompts: Sequence[str], options: dict[str, str], *, done_before: int = 0,
               total: int | None = None) -> list:
        """`pipelines.llm.choose` for each prompt, in order, progress after each (as item
        done_before + k + 1 of `total`); stops at a cancel, returning the choices made before it."""
        from pipelines.llm.choose import choose
        from pipelines.llm.requests import Progress

        total = len(prompts) if total is None else total
        sizes = [self.tokens(p, True) for p in prompts]  # once each: the total and each prompt's count
        n_all = sum(sizes)
        out, done, t0 = [], 0, time.perf_counter()
        for k, (prompt, n) in enumerate(zip(prompts, sizes, strict=True)):
            if self.cancelled:
                break
            out.append(choose(self.llm, prompt, options))
            done += n
            self.add(requests=1, prompt_tokens=n)
            self.progress(Progress(done, n_all, time.perf_counter() - t0, done_before + k + 1, total))
        return out

    def generate(self, prompts: Sequence[str], *, max_tokens: int, stop: Sequence[str] = ()) -> list:
        """Greedy completions of `prompts` in one engine batch (engine GenerationOutputs, in order;
        finish_reason "abort" for those a cancel stopped), progress per engine step."""
        from engine import SamplingParams
        from pipelines.llm.requests import Progress

        t0 = time.perf_counter()

        def on_step(p) -> bool:
            self.progress(Progress(p.tokens_done, p.tokens_total, time.perf_counter() - t0, p.finished, len(prompts)))
            return self.cancelled

        with engine_lock(self.llm):
            outs = self.llm.generate(list(prompts), SamplingParams(max_tokens=max_tokens, stop=list(stop)),
                                     on_step=on_step)
        for out in outs:
            self.add(requests=1, prompt_tokens=len(out.prompt_token_ids), generated_tokens=len(out.token_ids))
        return outs

    def attention(self, items) -> list:
        """`pipelines.llm.spans.attention_shares` of (doc, prefix, suffix, text, spans) items: the
        (share, mass) of each item's text's attention on each span, None for an item without
        spans or text; one engine call."""
        from pipelines.llm.spans import attention_shares

        with engine_lock(self.llm):
            got = attention_shares(self.llm, items)
        for (doc, prefix, suffix, text, _), g in zip(items, got, strict=True):
            if g is not None:
                self.add(requests=1, prompt_tokens=self.tokens(prefix + doc.text + suffix + text, True))
        return got

    def attribute(self, prompt: str, continuation, spans: Sequence[tuple[int, int]], *, estimated_s: float = 0.0):
        """One `LLM.attribute` pass (prompt, continuation text or token ids, character spans of the
        prompt). The engine's attribution has no progress hook, so while it runs the progress
        callback gets an estimate once a second (elapsed against `estimated_s`, at most 95%); a
        cancel is seen before and after it."""
        from pipelines.llm.requests import Progress

        n_cont = len(continuation) if not isinstance(continuation, str) else self.tokens(continuation)
        total = self.tokens(prompt, True) + n_cont
        box: dict = {}

        def work() -> None:
            try:
                box["out"] = self.llm.attribute(prompt, continuation, list(spans))
            except BaseException as exc:  # noqa: BLE001 - re-raised on the calling thread
                box["err"] = exc

        t0 = time.perf_counter()
        with engine_lock(self.llm):
            th = threading.Thread(target=work, name="longdoc-attribute", daemon=True)
            th.start()
            while th.is_alive():
                th.join(1.0)
                if th.is_alive():
                    el = time.perf_counter() - t0
                    frac = min(0.95, el / estimated_s) if estimated_s > 0 else 0.0
                    self.progress(Progress(int(frac * total), total, el, 0, 1))
        if "err" in box:
            raise box["err"]
        self.add(requests=1, prompt_tokens=total)
        self.progress(Progress(total, total, time.perf_counter() - t0, 1, 1))
        return box["out"]

    def progress(self, p) -> None:
        """`on_progress` for ask_document: forwards (step name, Progress) to the run's callback."""
        if self.run.on_progress is not None:
            self.run.on_progress(self.record.step, p)

    def add(self, result=None, *, requests: int = 0, prompt_tokens: int = 0, generated_tokens: int = 0) -> None:
        """Account a pipelines.llm BatchResult (requests, tokens, reuse, item errors, a stop) or raw counts."""
        r = self.record
        r.requests += requests
        r.prompt_tokens += prompt_tokens
        r.generated_tokens += generated_tokens
        if result is None:
            return
        r.requests += len(result.items)
        for it in result.items:
            r.prompt_tokens += int(it.metrics.get("prompt_tokens", 0))
            r.generated_tokens += len(it.token_ids)
            r.item_errors += int(it.error is not None)
        for k, v in (result.reuse or {}).items():
            r.reuse[k] = r.reuse.get(k, 0) + int(v)
        if result.status != "ok" and result.message:
            r.reason = result.message


class LLMRun:
    """The LLM side of one pipeline run; see the module docstring. `engine`: an already loaded
    engine.LLM to use instead of loading from `settings` (tests, the UI's cached handle).
    on_progress(step, Progress); cancel: a threading.Event; budget_s: auto skips a step whose
    estimate exceeds it (on runs it regardless) and ask_document callers may pass it on.
    on_progress is also called with ("loading the model", None) before the engine loads and
    ("loading the model", False) when that is over."""

    def __init__(self, mode: LLMMode | str = LLMMode.OFF, settings: EngineSettings | None = None, *,
                 engine=None, on_progress: Callable[[str, Any], None] | None = None,
                 cancel: threading.Event | None = None, budget_s: float | None = None) -> None:
        self.mode = LLMMode.parse(mode)
        self.settings = settings if settings is not None else EngineSettings.from_env()
        self._llm, self._load_error = engine, None
        self.on_progress, self.cancel, self.budget_s = on_progress, cancel, budget_s
        self.records: list[StepRecord] = []
        self.answers: list[Answer] = []

    @classmethod
    def off(cls) -> LLMRun:
        return cls(LLMMode.OFF, EngineSettings())

    @property
    def active(self) -> bool:
        return self.mode is not LLMMode.OFF

    @property
    def model_key(self) -> str:
        """The registry key of the configured model: "default" for the packaged Gemma 3 270M, else its path."""
        return DEFAULT_MODEL if self.settings.model is None else str(self.settings.model)

    @property
    def device(self) -> str:
        if self._llm is not None:
            return "cuda" if str(getattr(self._llm, "device", "cpu")).startswith("cuda") else "cpu"
        if self.settings.device:
            return "cuda" if self.settings.device.startswith("cuda") else "cpu"
        try:
            import torch

            return "cuda" if torch.cuda.is_available() else "cpu"
        except ImportError:  # pragma: no cover
            return "cpu"

    def estimate_s(self, prompt_tokens: int, decode_steps: int = 0) -> float:
        """A rough time for `prompt_tokens` of prefill and `decode_steps` batched decode steps here."""
        r = RATES[self.device]
        return prompt_tokens / r["prefill_tok_s"] + decode_steps / r["decode_steps_s"]

    def wants(self, step: str, estimated_s: float | None = None) -> bool:
        """Whether `step` would run under this run's mode (no record is written)."""
        return step_enabled(step, self.mode, self.model_key, estimated_s, self.budget_s)

    def engine(self):
        """The engine (loaded once per process and settings); raises EngineUnavailable (one line)."""
        if self._llm is None:
            if self._load_error is not None:
                raise EngineUnavailable(self._load_error)
            if self.on_progress is not None:  # a phase without a token count: callers show a spinner
                self.on_progress("loading the model", None)
            try:
                self._llm = get_engine(self.settings)
            except EngineUnavailable as exc:
                self._load_error = str(exc)
                raise
            finally:
                if self.on_progress is not None:
                    self.on_progress("loading the model", False)
        return self._llm

    @contextmanager
    def step(self, name: str, estimated_s: float | None = None, *, explicit: bool = False
             ) -> Iterator[StepContext | None]:
        """Run the body as step `name` when enabled (yields a StepContext) or skip it (yields None);
        see the module docstring. explicit: the user asked for this step itself (`--ask`): it runs
        under every mode."""
        if not self.active and not explicit:
            yield None
            return
        rec = StepRecord(step=name, ran=False, estimated_s=None if estimated_s is None else round(estimated_s, 1))
        self.records.append(rec)
        if not explicit and not self.wants(name, estimated_s):
            rec.reason = _why_not(name, self.mode, self.model_key, estimated_s, self.budget_s)
            yield None
            return
        if self.cancel is not None and self.cancel.is_set():
            rec.reason = "cancelled before it started"
            yield None
            return
        try:
            llm = self.engine()
        except EngineUnavailable as exc:
            rec.reason, rec.error = "no model", str(exc)
            yield None
            return
        rec.ran = True
        t0 = time.perf_counter()
        try:
            yield StepContext(self, rec, llm)
        except Exception as exc:  # noqa: BLE001 - engine failures end the step, never the pipeline
            if not _engine_failure(exc):
                raise
            rec.error = _one_line(exc)
        finally:
            rec.seconds = round(time.perf_counter() - t0, 3)

    def report(self) -> LLMReport | None:
        """The report a result carries; None with mode off and nothing asked."""
        if not self.active and not self.records and not self.answers:
            return None
        msg = self._load_error
        return LLMReport(mode=self.mode.value, model=self.settings.describe(), steps=list(self.records), message=msg,
                         answers=list(self.answers) if self.answers else None)

    def ask(self, docs: Document | list[Document], questions: list[str], *, fallback="retrieval",
            max_tokens: int = MAX_TOKENS, evidence: bool = True, instructions: str | None = None,
            structure: Callable[[str], Answer | None] | None = None) -> list[Answer]:
        """Answer `questions` over `docs` (see the module docstring); recorded as step "ask", the
        answers kept for the report and returned. An engine that cannot load or fails gives every
        question that one-line error. fallback: a strategy name ("retrieval", "truncate:middle",
        ...) or an engine FallbackPolicy. evidence False: the model's texts only, unchecked (tests
        of the generation path; never shown to a user as answers). instructions: the text before
        the document (default `pipelines.llm.INSTRUCTIONS`). structure: the pipeline's answerer from
        its own structure (question -> Answer, or None): what it answers never reaches the engine."""
        return self.ask_many([(docs, questions)], fallback=fallback, max_tokens=max_tokens, evidence=evidence,
                             instructions=instructions, structures=[structure])[0]

    def ask_many(self, jobs: list[tuple[Document | list[Document], list[str]]], *, fallback="retrieval",
                 max_tokens: int = MAX_TOKENS, evidence: bool = True, instructions: str | None = None,
                 structures: list[Callable[[str], Answer | None] | None] | None = None) -> list[list[Answer]]:
        """`ask` for several inputs at once, each (documents, questions): one step "ask" whose
        questions, over every input, go to the engine together (`ask_documents`: the inputs' KV
        computed together and the decodes batched across them), then every answer's evidence in
        one pass (`pipelines.llm.evidence.gather`). One list of answers per input. structures: per
        input, the pipeline's structure answerer (question -> Answer, or None when the structure
        does not answer it): a question it answers never reaches the engine."""
        structures = list(structures) if structures is not None else [None] * len(jobs)
        routed: list[dict[int, Answer]] = []
        rest: list[tuple[Document | list[Document], list[str]]] = []
        for (docs, questions), structure in zip(jobs, structures, strict=True):
            got = {}
            if structure is not None:
                for i, q in enumerate(questions):
                    a = structure(q)
                    if a is not None:
                        got[i] = a
            routed.append(got)
            rest.append((docs, [q for i, q in enumerate(questions) if i not in got]))
        asked = [k for k, (_, qs) in enumerate(rest) if qs]
        engine_out = self._ask_engine([rest[k] for k in asked], fallback=fallback, max_tokens=max_tokens,
                                      evidence=evidence, instructions=instructions) if asked else []
        by_job = dict(zip(asked, engine_out, strict=True))
        out = []
        for k, ((_, questions), got) in enumerate(zip(jobs, routed, strict=True)):
            from_engine = iter(by_job.get(k, []))
            out.append([got[i] if i in got else next(from_engine) for i in range(len(questions))])
        self.answers.extend(a for answers in out for a in answers)
        return out

    def _ask_engine(self, jobs: list[tuple[Document | list[Document], list[str]]], *, fallback, max_tokens: int,
                    evidence: bool, instructions: str | None) -> list[list[Answer]]:
        from pipelines.llm.requests import INSTRUCTIONS, QUESTION, STOP, ask_documents, prompt_frame

        instructions = INSTRUCTIONS if instructions is None else instructions
        joined = [join_documents([d] if isinstance(d, Document) else list(d)) for d, _ in jobs]
        policy = fallback_policy(fallback) if isinstance(fallback, str) else fallback
        out = None
        with self.step("ask", explicit=True) as st:
            if st is not None:
                t0 = time.perf_counter()
                head, question = prompt_frame(st.llm, instructions, QUESTION)  # a chat model's template
                # one paragraph: a base model copying the document runs on past its answer
                results = ask_documents(st.llm, [(j.doc, list(qs)) for j, (_, qs) in zip(joined, jobs, strict=True)],
                                        instructions=head, question_template=question, max_tokens=max_tokens,
                                        stop=(*STOP, "\n\n"), attribute=False, on_progress=st.progress,
                                        cancel=self.cancel, fallback=policy)
                for res in results:
                    st.add(res)
                found = self._evidence(st, results, joined, head, question, t0) if evidence else \
                    [[None] * len(res.items) for res in results]
                seconds = round(time.perf_counter() - t0, 3)
                calibrated = _default_model(st.llm)
                out = [[_answer(it, j, seconds, f, calibrated) for it, f in zip(res.items, fs, strict=True)]
                       for res, j, fs in zip(results, joined, found, strict=True)]
        if out is None:  # no engine, or it failed: the record holds the one line
            rec = self.records[-1]
            why = rec.error or rec.reason or "no answer"
            out = [[Answer(question=q, text="", status="error", error=why) for q in qs] for _, qs in jobs]
        return out


    def _evidence(self, st: StepContext, results, joined, instructions: str, question: str, t0: float) -> list[list]:
        """Each answered item's evidence (`pipelines.llm.evidence.gather`, one pass for the call);
        an item with an error gets none (no engine work is spent on it), and a run cancelled
        before this pass marks its items so instead of showing their unread model text."""
        from pipelines.llm.evidence import EvidenceJob, gather
        from pipelines.llm.requests import Progress

        live = [[i for i, it in enumerate(res.items) if it.error is None] for res in results]
        n_q = sum(len(k) for k in live)
        if self.cancel is not None and self.cancel.is_set():
            for res, keep in zip(results, live, strict=True):
                for i in keep:
                    res.items[i].error = "cancelled before its evidence was read"
            return [[None] * len(res.items) for res in results]
        st.progress(Progress(0, n_q, time.perf_counter() - t0, 0, n_q, phase="reading the evidence"))
        jobs = []
        for j, res, keep in zip(joined, results, live, strict=True):
            items = [res.items[i] for i in keep]
            jobs.append(EvidenceJob(j.doc, instructions, [it.question for it in items],
                                    [question.format(question=it.question) for it in items],
                                    [it.text for it in items], [it.fallback is None for it in items], j.ranges()))
        got = gather(st.llm, jobs)
        st.progress(Progress(n_q, n_q, time.perf_counter() - t0, n_q, n_q, phase="reading the evidence"))
        out = []
        for res, keep, fs in zip(results, live, got, strict=True):
            row: list = [None] * len(res.items)
            for i, f in zip(keep, fs, strict=True):
                row[i] = f
            out.append(row)
        return out


def fallback_policy(spec: str):
    """An engine FallbackPolicy from "retrieval", "truncate:middle", "map_reduce", "error", ...;
    ValueError for a malformed spec (the engine raises its EngineError for an unknown strategy)."""
    from engine.fallback import FallbackPolicy

    strategy, _, side = spec.partition(":")
    if side and strategy != "truncate":
        raise ValueError(f"fallback {spec!r}: only truncate takes a side (truncate:head, :tail, :middle)")
    return FallbackPolicy(strategy=strategy, truncate_side=side or "middle")


def join_documents(docs: list[Document]) -> Joined:
    """One document for the model from several, each headed by its name ("[name]"), blank lines
    between (`Document.join`); a single document is used as it is."""
    if len(docs) == 1:
        return Joined(docs[0], (Segment(0, len(docs[0].text), docs[0], 0),))
    pieces: list = []
    for i, d in enumerate(docs):
        pieces += [("\n\n" if i else "") + f"[{d.source_name or d.doc_id}]\n", (d, 0, len(d.text))]
    return Document.join(pieces, doc_id="+".join(d.doc_id for d in docs))


def _default_model(llm) -> bool:
    """Whether `llm` runs the packaged default model (the one the evidence fusion and confidence
    were fitted with)."""
    from engine import default_model_path

    path = getattr(llm, "model_path", None)
    try:
        return path is not None and Path(path).resolve() == Path(default_model_path()).resolve()
    except OSError:
        return False


def _answer(item, joined: Joined, seconds: float, found=None, calibrated: bool = True) -> Answer:
    """The Answer for an engine item and its evidence (`found`: a pipelines.llm.evidence.Found, or
    None when evidence was not read: the model's text alone, marked unsupported)."""
    report, how = item.fallback, None
    if report is not None and report.fallback_triggered:
        how = report.strategy + (f":{report.truncate_side}" if report.truncate_side else "")
        if report.chunks_total:
            how += f", {report.chunks_used}/{report.chunks_total} chunks"
        how = (f"did not fit ({report.reason}): {how}, {report.tokens_dropped:,} of "
               f"{report.document_tokens:,} document tokens dropped")
    ttft = item.metrics.get("ttft_s")
    common = dict(question=item.question, finish_reason=item.finish_reason, fallback=how,
                  fallback_report=report.to_dict() if report is not None else None,
                  prompt_tokens=int(item.metrics.get("prompt_tokens", 0)),
                  cached_prompt_tokens=int(item.metrics.get("cached_prompt_tokens", 0) or 0),
                  ttft_s=None if ttft is None else round(float(ttft), 3), seconds=seconds)
    model_text = item.text.strip() or None
    if item.error is not None:
        return Answer(text="", status="error", error=item.error, model_text=model_text, **common)
    if found is None:
        return Answer(text=item.text.strip(), model_text=model_text, model_supported=False, **common)

    def spans(passages) -> list[AnswerSpan]:
        out = []
        for p in passages:
            src = joined.to_source(p.start, p.end)
            if src is not None:
                out.append(AnswerSpan(**src.model_dump(), score=round(p.prob, 4)))
        return out

    value = joined.to_source(*found.value) if found.value is not None else None
    return Answer(text=found.text, status=found.status, confidence=found.confidence, kind=found.kind, value=value,
                  spans=spans(found.passages), near_misses=spans(found.near), model_text=model_text,
                  model_supported=None if found.support is None else found.support.supported,
                  warnings=list(found.warnings), calibrated=calibrated, **common)


def _why_not(step: str, mode: LLMMode, model: str, estimated_s: float | None, budget_s: float | None) -> str:
    d = decision(step, model)
    if d is None or d.measurement is None:
        return f"auto: not measured with {model}" + (f" ({d.note})" if d is not None and d.note else "")
    if not d.in_auto or d.measurement.gain <= 0:
        return f"auto: no measured gain with {model} ({d.measurement.metric} {d.measurement.without:g} -> " \
               f"{d.measurement.with_step:g})"
    return f"auto: estimated {estimated_s:.0f} s is over the {budget_s:g} s budget"


def _engine_failure(exc: BaseException) -> bool:
    """Engine-side failures a step records instead of raising: the engine's own errors, a model that
    cannot load, CUDA out of memory."""
    if isinstance(exc, EngineUnavailable):
        return True
    try:
        from engine import EngineError

        if isinstance(exc, EngineError):
            return True
    except ImportError:  # pragma: no cover
        pass
    try:
        import torch

        if isinstance(exc, torch.OutOfMemoryError):
            return True
    except (ImportError, AttributeError):  # pragma: no cover
        pass
    return False


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return (text.splitlines()[0] if text else type(exc).__name__)[:300]
