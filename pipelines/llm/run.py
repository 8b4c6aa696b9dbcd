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
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from pipelines.llm.modes import DEFAULT_MODEL, LLMMode, decision, step_enabled
from pipelines.llm.settings import EngineSettings, EngineUnavailable, get_engine

# Rough throughput of the packaged Gemma 3 270M used to estimate a step's time before running it
# (BENCHMARKS.md, "CPU: engine against transformers": 2K-token prefill in 4.5 s, ~10 tok/s decode in
# float32 on the 2-core machine; the H200 figures from "The user path on the H200").
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


class LLMReport(BaseModel):
    """The LLM part of a result: mode, the model (one line), each step's record, and a one-line
    message when no model could be loaded."""

    model_config = ConfigDict(extra="forbid")

    mode: str
    model: str
    steps: list[StepRecord] = Field(default_factory=list)
    message: str | None = None

    def ran(self, step: str) -> bool:
        return any(s.step == step and s.ran for s in self.steps)


class StepContext:
    """Handed to a running step: the engine, a progress callback for `ask_document`, and `add` to
    account a BatchResult (or raw counts) to the step's record."""

    def __init__(self, run: LLMRun, record: StepRecord, llm) -> None:
        self.run, self.record, self.llm = run, record, llm

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
    estimate exceeds it (on runs it regardless) and ask_document callers may pass it on."""

    def __init__(self, mode: LLMMode | str = LLMMode.OFF, settings: EngineSettings | None = None, *,
                 engine=None, on_progress: Callable[[str, Any], None] | None = None,
                 cancel: threading.Event | None = None, budget_s: float | None = None) -> None:
        self.mode = LLMMode.parse(mode)
        self.settings = settings if settings is not None else EngineSettings.from_env()
        self._llm, self._load_error = engine, None
        self.on_progress, self.cancel, self.budget_s = on_progress, cancel, budget_s
        self.records: list[StepRecord] = []

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
            try:
                self._llm = get_engine(self.settings)
            except EngineUnavailable as exc:
                self._load_error = str(exc)
                raise
        return self._llm

    @contextmanager
    def step(self, name: str, estimated_s: float | None = None) -> Iterator[StepContext | None]:
        """Run the body as step `name` when enabled (yields a StepContext) or skip it (yields None);
        see the module docstring."""
        if not self.active:
            yield None
            return
        rec = StepRecord(step=name, ran=False, estimated_s=None if estimated_s is None else round(estimated_s, 1))
        self.records.append(rec)
        if not self.wants(name, estimated_s):
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
        """The report a result carries; None with mode off."""
        if not self.active:
            return None
        msg = self._load_error
        return LLMReport(mode=self.mode.value, model=self.settings.describe(), steps=list(self.records), message=msg)


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
