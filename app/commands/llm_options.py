"""The LLM options every pipeline command and `longdoc batch` take, the LLMRun they build, the
progress display on stderr (model load, each step's tokens with the time left) and the answers to
`--ask` on the terminal.

    --llm off|auto|on     (default auto, or $LONGDOC_LLM): off is exactly the rules' output; auto runs
                          a step only where it was measured to help with the configured model and
                          its estimated time here is within --llm-budget; on runs every step
    --ask "question"      (repeatable) answered over the document(s), one batch, the KV computed once
    --model/--device/--dtype/--max-model-len   the engine (or $LONGDOC_MODEL, ...)
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import typer

LLM_HELP = ("LLM steps: off (rules only, exactly their output), auto (only the steps measured to help with the "
            "configured model, each within --llm-budget), on (every step). Default: auto, or $LONGDOC_LLM.")
ASK_HELP = ("A question about the document, answered by the local engine with the sentences it rests on "
            "(repeatable: all in one batch, the document computed once). Runs with every --llm mode.")
BUDGET_S = 120.0


def llm_option():
    return typer.Option("auto", "--llm", envvar="LONGDOC_LLM", show_envvar=False, help=LLM_HELP)


def budget_option():
    return typer.Option(BUDGET_S, "--llm-budget", min=0.0,
                        help="Seconds: with --llm auto a step estimated to take longer here is left out.")


def ask_option():
    return typer.Option([], "--ask", help=ASK_HELP)


def model_option():
    return typer.Option(None, "--model", help="GGUF file or HF folder for the LLM steps (default: Gemma 3 270M).")


def device_option():
    return typer.Option(None, "--device", help="cpu or cuda for the LLM steps (default: cuda if available).")


def dtype_option():
    return typer.Option(None, "--dtype", help="float32, bfloat16 or float16.")


def max_len_option():
    return typer.Option(None, "--max-model-len", help="The engine's context limit in tokens.")


def cache_dir_option():
    return typer.Option(None, "--cache-dir",
                        help="Keep the documents' KV on disk here: a later run over the same document (another "
                             "--ask, another mode) skips its prefill.")


def make_run(mode: str, model: Path | None, device: str | None, dtype: str | None, max_model_len: int | None,
             budget_s: float | None, on_progress=None, cache_dir: Path | None = None):
    """The LLMRun for a command's flags; a bad --llm value or setting is a usage error (exit 2)."""
    from pipelines.llm import EngineSettings, LLMRun

    if cache_dir is not None:  # before any analysis, not when the engine loads after it
        from engine import CacheDirError, check_cache_dir

        try:
            check_cache_dir(cache_dir)
        except CacheDirError as exc:
            typer.echo(f"longdoc: --cache-dir: {exc}", err=True)
            raise typer.Exit(2) from None
    try:
        settings = EngineSettings.from_env(model=model, device=device, dtype=dtype, max_model_len=max_model_len,
                                           disk_cache_dir=str(cache_dir) if cache_dir else None)
        return LLMRun(mode, settings, on_progress=on_progress, budget_s=budget_s, cancel=threading.Event())
    except ValueError as exc:
        typer.echo(f"longdoc: {exc}", err=True)
        raise typer.Exit(2) from None


@contextmanager
def stop_on_ctrl_c(run) -> Iterator[None]:
    """While the LLM steps run, the first Ctrl-C stops them (the run's cancel event: the step in
    flight ends at its next chunk or token and is recorded as stopped) and the rules' result is
    still printed; a second Ctrl-C quits at once. Only in the main thread (signals live there)."""
    if threading.current_thread() is not threading.main_thread() or run.cancel is None:
        yield
        return

    def handler(signum, frame) -> None:
        if run.cancel.is_set():
            raise KeyboardInterrupt
        run.cancel.set()
        typer.echo("longdoc: stopping the LLM steps; the rules' result follows (Ctrl-C again to quit)", err=True)

    previous = signal.signal(signal.SIGINT, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


@contextmanager
def llm_progress(disable: bool = False) -> Iterator:
    """A rich display on stderr for LLMRun's on_progress(step, p): a spinner while the model loads,
    then per step a bar of tokens done / total with answers finished and the time left (plain lines
    when stderr is not a terminal: `app.progress.LineProgress`). Yields the
    callback (usable before the display opens: nothing is drawn until a step reports)."""
    from rich.console import Console
    from rich.progress import BarColumn, SpinnerColumn, TextColumn, TimeElapsedColumn

    from app.progress import progress_display

    columns = (SpinnerColumn(), TextColumn("{task.description}"), BarColumn(),
               TextColumn("{task.fields[done]}"), TimeElapsedColumn(), TextColumn("{task.fields[left]}"))
    with progress_display(*columns, console=Console(stderr=True), disable=disable, transient=False) as bar:
        tasks: dict[str, int] = {}

        def update(step: str, p) -> None:
            if step not in tasks:
                tasks[step] = bar.add_task(step, total=None, done="", left="")
            task = tasks[step]
            if p is None:  # a phase without a count (loading the model)
                return
            if p is False:
                bar.update(task, total=1, completed=1, done="done")
                return
            eta = p.eta_s
            if getattr(p, "phase", ""):  # a later pass over the answers: its own bar, counted in answers
                key = f"{step}: {p.phase}"
                if key not in tasks:
                    tasks[key] = bar.add_task(key, total=None, done="", left="")
                bar.update(tasks[key], completed=p.items_done, total=max(p.items_total, 1),
                           done=f"{p.items_done}/{p.items_total} answers", left="")
                return
            bar.update(task, completed=p.tokens_done, total=max(p.tokens_total, 1),
                       done=f"{p.tokens_done:,}/{p.tokens_total:,} tokens, {p.items_done}/{p.items_total}",
                       left="" if eta is None else f"about {eta:,.0f} s left")

        yield update


def answer_lines(answers) -> list[str]:
    """The answers to --ask as terminal lines, evidence first: question; the answer (the value asked
    for, the model's wording where the quotes carry it, or the quote), or "not stated in the
    document", with its calibrated confidence (a low one says to check the quote:
    `evidence.low_confidence`); the quoted passages with file, page and offsets (the value marked
    »like this« inside the first), or the near misses; the model's wording when the quotes carry it
    and it is not already the answer (unsupported model text is never printed); one line of cost."""
    from pipelines.llm.evidence import low_confidence

    lines = []
    for a in answers:
        lines.append(f"Q: {a.question}")
        uncal = "" if getattr(a, "calibrated", True) else ", not calibrated for this model"
        conf = "" if a.confidence is None else f"  [confidence {a.confidence:.0%}{uncal}]"
        if getattr(a, "route", "evidence") == "structure":
            conf = "  [from the document's structure: exact]"
        if a.error is not None:
            lines.append(f"A: (no answer: {a.error})")
        elif a.status == "not_stated":
            lines.append(f"A: {a.text}{conf}")
            for s in a.near_misses:
                lines.append(f"   nearest ({s.score:.0%}): {_where(s)}: “{_snippet(s.text)}”")
        else:
            head = "A (low confidence, check the quote):" if low_confidence(a) else "A:"
            lines.append(f"{head} {' '.join(a.text.split())}{conf}")
            for n, s in enumerate(a.spans):
                quote = _snippet(_marked(s, a.value) if n == 0 else s.text)
                lines.append(f"   quote ({s.score:.0%}): {_where(s)}: “{quote}”")
            if a.model_supported and a.model_text and " ".join(a.model_text.split()) != " ".join(a.text.split()):
                lines.append(f"   in the model's words (carried by the quote): {_snippet(a.model_text)}")
        for w in getattr(a, "warnings", None) or []:
            lines.append(f"   warning: {w}")
        if getattr(a, "route", "evidence") == "structure":  # no model was asked: nothing to account
            lines.append("")
            continue
        cost = [f"prompt {a.prompt_tokens:,} tokens"]
        if a.fallback:
            cost.append(a.fallback)
        if a.ttft_s is not None:
            cost.append(f"first token {a.ttft_s:.2f} s")
        if a.cached_prompt_tokens:
            cost.append(f"{a.cached_prompt_tokens:,} prompt tokens from the cache")
        cost.append(f"{a.seconds:.1f} s in all")
        lines.append("   " + " · ".join(cost))
        lines.append("")
    return lines


def _where(s) -> str:
    page = "" if s.page is None else f" p.{s.page}"
    return f"{s.doc_id}{page} [{s.char_start}:{s.char_end}]"


def _marked(span, value) -> str:
    """The span's text with the value (a span inside it) between » and «."""
    if value is None or value.doc_id != span.doc_id or not (span.char_start <= value.char_start
                                                            and value.char_end <= span.char_end):
        return span.text
    a, b = value.char_start - span.char_start, value.char_end - span.char_start
    return span.text[:a] + "»" + span.text[a:b] + "«" + span.text[b:]


def _snippet(text: str, limit: int = 240) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit - 1] + "…"


def report_line(report) -> str | None:
    """One line for the terminal: the LLM steps that ran and what each cost, or why none did."""
    if report is None:
        return None
    ran = [f"{s.step} {s.seconds:.1f} s" for s in report.steps if s.ran and s.step != "ask"]
    skipped = [f"{s.step} ({s.reason or s.error})" for s in report.steps if not s.ran and s.step != "ask"]
    parts = [f"LLM {report.mode}"]
    if ran:
        parts.append("ran " + ", ".join(ran))
    if skipped:
        parts.append("left out " + "; ".join(skipped))
    if not ran and not skipped:
        if report.mode == "off":
            return None
        parts.append("no LLM step applies")
    if report.message:
        parts.append(report.message)
    return " · ".join(parts)


def check_questions(questions: list[str]) -> None:
    if any(not q.strip() for q in questions):
        typer.echo("longdoc: every --ask needs a question", err=True)
        raise typer.Exit(2)


def ask_and_attach(run, result, docs, questions: list[str], pipeline=None) -> bool:
    """Answer `questions` over `docs` (when any) and put the run's report on the result; True when
    every question has an answer. pipeline: the Pipeline that made `result`; a question its own
    structure answers (`Pipeline.structure_answerer`) is answered from it, not by the engine."""
    structure = pipeline.structure_answerer(result, list(docs)) if pipeline is not None else None
    answers = run.ask(docs, questions, structure=structure) if questions else []
    report = run.report()
    if report is not None or "llm" in type(result).model_fields:
        result.llm = report
    return all(a.error is None for a in answers)


def print_llm(result, questions: list[str]) -> None:
    """The LLM line and the answers to --ask, after a command's terminal output."""
    report = getattr(result, "llm", None)
    line = report_line(report)
    if line:
        typer.echo(line, err=True)
    if questions and report is not None and report.answers:
        typer.echo("\n" + "\n".join(answer_lines(report.answers)).rstrip())
