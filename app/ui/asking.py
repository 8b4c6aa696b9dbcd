"""The LLM side of every page: the mode choice (off / auto / on), the run's progress, what the run's
report says, and "Ask about this document" with the answer's spans highlighted in the document.

- `mode_choice(key)`: off / auto / on (default auto, or $LONGDOC_LLM) and the model line.
- `make_run(mode, on_progress, cancel)`: the `pipelines.llm.LLMRun` a page passes to its pipeline
  (`llm=run`). One engine per process: the run loads through `pipelines.llm.get_engine` (one handle
  per process and settings, shared by every page, session and rerun) and a page hands an engine
  already loaded to `LLMRun(engine=...)`, so a second question over the same document takes the
  document's KV from the engine's document cache ("document reused").
- `RunProgress`: LLMRun's `on_progress` drawn in an `st.status`: the phase, then one bar per step
  with tokens done of the total, requests finished and the time left. A rerun asked for while the
  engine works (any click, the Stop button) cancels the engine cleanly before the page reruns.
- `show_llm_report(report)`: steps that ran (seconds, requests, tokens, reuse) and those left out
  (why), and the one line when no model could be loaded, the rules' result being intact.
- `ask_box(key, docs, mode, structure=...)`: the question box; each answer evidence first (the
  quoted passages marked in excerpts of their document, the value inside darker, the calibrated
  confidence, or "not stated" with the nearest passages; a question the pipeline's structure
  answers needs no model), its time to first token and the fallback line when the documents did
  not fit (`show_answer`, shared with the Ask page).

Document and model text is untrusted: it goes through `md_text` / `md_line` or `html.escape`.
"""

from __future__ import annotations

import html
import os
import re
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import streamlit as st

from app.ui.common import md_line, md_text
from pipelines.documents import Document
from pipelines.llm.evidence import low_confidence

MODES = ("off", "auto", "on")
BUDGET_S = 120.0  # auto leaves out a step estimated to take longer here (the CLI's --llm-budget default)
MODE_HELP = ("off: the rules only, exactly their result. auto: only the LLM steps measured to help with the "
             f"configured model, each estimated to take at most {BUDGET_S:.0f} s here. on: every LLM step (slow on "
             "a CPU). Questions below are answered in every mode.")
RESTS = "#fef3c7"  # a quoted passage
VALUE = "#fcd34d"  # the value asked for, inside the quoted passage
CONTEXT_CHARS = 160  # document text shown on each side of a span
MAX_ANSWERS = 10  # answers kept per page
_SPACE = re.compile(r"\s+")


def default_mode() -> str:
    """auto, or $LONGDOC_LLM when it names a mode."""
    value = (os.environ.get("LONGDOC_LLM") or "auto").strip().lower()
    return value if value in MODES else "auto"


def engine_settings():
    """EngineSettings from the environment (LONGDOC_MODEL, ...); ValueError (one line) for a bad value."""
    from pipelines.llm import EngineSettings

    return EngineSettings.from_env()


def mode_choice(key: str) -> str:
    """The LLM mode radio for the page `key`, with the model it would use under it."""
    show_stopped_note()
    mode = st.radio("LLM steps", MODES, index=MODES.index(default_mode()), horizontal=True, key=f"{key}_llm",
                    help=MODE_HELP)
    try:
        st.caption("Local model: " + md_text(engine_settings().describe()))
    except ValueError as exc:
        st.caption(md_line(str(exc)))
    return mode


def loaded_engine(settings):
    """The process's engine for `settings` when one is loaded already, else None (LLMRun then loads
    it through get_engine, reporting 'loading the model' to its progress callback)."""
    from pipelines.llm import get_engine, loaded_engines

    return get_engine(settings) if settings in loaded_engines() else None


def make_run(mode: str, on_progress=None, cancel: threading.Event | None = None):
    """The LLMRun for a page's run or question, or None after one st.error line for a bad setting."""
    from pipelines.llm import LLMRun

    try:
        settings = engine_settings()
    except ValueError as exc:
        st.error(md_line(str(exc)))
        return None
    return LLMRun(mode, settings, engine=loaded_engine(settings), on_progress=on_progress, cancel=cancel,
                  budget_s=BUDGET_S)


# -------------------------------------------------------------------------------------------------
# progress

def _control_exceptions() -> tuple[type[BaseException], ...]:
    try:
        from streamlit.runtime.scriptrunner_utils.exceptions import ScriptControlException
    except ImportError:  # pragma: no cover - older Streamlit
        try:
            from streamlit.runtime.scriptrunner.exceptions import ScriptControlException
        except ImportError:
            return ()
    return (ScriptControlException,)


STEP_NAMES = {"ask": "Answering", "loading the model": "Loading the model"}
STOPPED = "longdoc_llm_stopped"  # the note a stopped run leaves for the page's next run
BUSY = "longdoc_llm_busy"  # a threading.Event set when the session's last RunProgress block has ended
STOP_WAIT_S = 300.0


_BOX: dict[str, dict] = {}  # per session: what a stopped run could not write into its session state
_BOX_LOCK = threading.Lock()


def _session_id() -> str:
    from streamlit.runtime.scriptrunner_utils.script_run_context import get_script_run_ctx

    ctx = get_script_run_ctx(suppress_warning=True)
    return ctx.session_id if ctx is not None else ""


def keep(key: str, value) -> None:
    """st.session_state[key] = value, also from a run Streamlit has stopped: a click while the
    engine works starts a new run at once (fast reruns) and every later session-state write of the
    old run raises; the value then waits in a per-session box that the next run empties
    (`show_stopped_note`)."""
    try:
        st.session_state[key] = value
    except _control_exceptions():
        with _BOX_LOCK:
            _BOX.setdefault(_session_id(), {})[key] = value


def show_stopped_note() -> None:
    """On a page's run: wait for a run of this session that was stopped (a click while the engine
    worked) to wind down, so its result is kept and the engine free, take what it kept, and say
    once that it was stopped. The old run leaves the engine at its next progress callback; a model
    load or a rules phase runs to its end first."""
    busy = st.session_state.get(BUSY)
    if busy is not None and not busy.is_set():
        slot = st.empty()
        with slot.status("Stopping the model's work (it stops at its next step; a model load or the rules "
                         "finish first)…"):
            busy.wait(STOP_WAIT_S)
        slot.empty()
    with _BOX_LOCK:
        box = _BOX.pop(_session_id(), {})
    for key, value in box.items():
        st.session_state[key] = value
    note = st.session_state.pop(STOPPED, None)
    if note:
        st.info(note)


def progress_line(step: str, p) -> str:
    """One bar's text: the step, tokens done of the total, requests finished, elapsed, time left."""
    eta = p.eta_s
    if p.tokens_total and p.tokens_done >= p.tokens_total:
        left = "finished"
    else:
        left = "estimating the time left" if eta is None else f"about {eta:,.0f} s left"
    return (f"{STEP_NAMES.get(step, step)}: {p.tokens_done:,} of {p.tokens_total:,} tokens · "
            f"{p.items_done} of {p.items_total} done · {p.elapsed_s:,.0f} s · {left}")


class RunProgress:
    """A page's view of a run: `with RunProgress("Parsing claims…") as prog:` opens an st.status;
    `prog.phase(label)` names a phase without a count; `prog` itself is LLMRun's on_progress(step, p)
    (p None: a phase without a count starts, False: it is over, else a pipelines.llm.Progress: a
    bar with tokens done / total and the time left). `prog.cancel` is the run's cancel event: a rerun
    requested while the engine works (a click anywhere, the Stop button) sets it, the engine stops
    cleanly, and the rerun happens when the block ends (`stopped` says so)."""

    def __init__(self, label: str, *, stop_key: str | None = None) -> None:
        self.label, self.stop_key = label, stop_key
        self.cancel = threading.Event()
        self.interrupted: BaseException | None = None
        self.bars: dict[str, object] = {}
        self.started: dict[str, float] = {}
        self.t0 = time.perf_counter()
        self.done_label: str | None = None
        self.failed = False
        self.current: str | None = None  # the step the status's label names

    def __enter__(self) -> RunProgress:
        self.busy = threading.Event()
        try:
            st.session_state[BUSY] = self.busy
            self.status = st.status(self.label, expanded=True)
            if self.stop_key is not None:
                self.status.button("Stop the model", key=self.stop_key,
                                   help="Stop the model's work; what the rules found is kept.")
        except BaseException:
            self.busy.set()
            raise
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        try:
            return self._exit(exc)
        finally:
            self.busy.set()

    def _exit(self, exc) -> bool:
        elapsed = time.perf_counter() - self.t0
        if exc is not None and self.interrupted is None and isinstance(exc, _control_exceptions()):
            return False  # a rerun outside the engine's work: let Streamlit have it
        state = "error" if exc is not None or self.failed else "complete"
        if self.interrupted is not None:
            label = f"Stopped after {elapsed:,.0f} s"
        elif exc is not None:
            label = "Could not finish (the reason is below)"
        else:
            label = self.done_label or f"Done in {elapsed:,.1f} s"
        self._ui(lambda: self.status.update(label=label, state=state, expanded=False))
        if self.interrupted is not None:
            keep(STOPPED, f"The model's work was stopped after {elapsed:,.0f} s; what the rules found is kept.")
            raise self.interrupted
        return False

    @property
    def stopped(self) -> bool:
        return self.interrupted is not None

    def phase(self, label: str) -> None:
        self._ui(lambda: self.status.update(label=label, expanded=True))

    def __call__(self, step: str, p) -> None:
        self._ui(lambda: self._show(step, p))

    def _show(self, step: str, p) -> None:
        name = STEP_NAMES.get(step, step)
        now = time.perf_counter()
        self.started.setdefault(step, now)
        bar = self.bars.get(step)
        if p is None:  # a phase without a count
            self.current = step
            self.status.update(label=f"{name}…", expanded=True)
            if bar is None:
                self.bars[step] = self.status.progress(0.0, text=f"{name}…")
            return
        if p is False:
            text = f"{name}: done in {now - self.started[step]:,.1f} s"
            if bar is None:
                self.bars[step] = self.status.progress(1.0, text=text)
            else:
                bar.progress(1.0, text=text)
            return
        if getattr(p, "phase", ""):  # a later pass over the answers (reading their evidence): its own bar
            key = f"{step}: {p.phase}"
            frac = p.items_done / p.items_total if p.items_total else 1.0
            text = f"{p.phase[:1].upper()}{p.phase[1:]}: {p.items_done} of {p.items_total} answers · {p.elapsed_s:,.0f} s"
            if key not in self.bars:
                self.bars[key] = self.status.progress(frac, text=text)
            else:
                self.bars[key].progress(frac, text=text)
            return
        if self.current != step:
            self.current = step
            self.status.update(label=f"{name}…", expanded=True)
        text = progress_line(step, p)
        if bar is None:
            self.bars[step] = self.status.progress(p.fraction, text=text)
        else:
            bar.progress(p.fraction, text=text)

    def _ui(self, draw: Callable[[], None]) -> None:
        """Draw, unless a rerun was asked for: then cancel the engine's work and draw nothing more."""
        if self.interrupted is not None:
            return
        try:
            draw()
        except _control_exceptions() as exc:
            self.interrupted = exc
            self.cancel.set()


# -------------------------------------------------------------------------------------------------
# the run's report

def step_rows(report) -> list[dict]:
    """One row per pipeline step of an LLMReport (the questions asked are shown with their answers)."""
    rows = []
    for s in report.steps:
        if s.step == "ask":
            continue
        if s.ran:
            status = "ran with an error" if s.error else "stopped" if s.reason.startswith("cancelled") else "ran"
            why = s.error or s.reason or ""
        else:
            status, why = "left out", (s.reason + (f": {s.error}" if s.error else ""))
        reuse = ", ".join(f"{k.replace('_', ' ')} {v:,}" for k, v in s.reuse.items() if v)
        rows.append({"step": s.step, "status": status, "why / error": why, "seconds": round(s.seconds, 1),
                     "requests": s.requests, "prompt tokens": s.prompt_tokens,
                     "generated tokens": s.generated_tokens, "reuse": reuse})
    return rows


def report_summary(report) -> str:
    """One line: the mode, and which steps ran (seconds) and how many were left out."""
    rows = step_rows(report)
    ran = [r for r in rows if r["status"] != "left out"]
    out = len(rows) - len(ran)
    if not rows:
        return f"LLM steps ({report.mode}): no LLM step applies to this result"
    parts = [f"{len(ran)} ran" + (f" in {sum(r['seconds'] for r in ran):,.1f} s" if ran else ""),
             f"{out} left out"]
    return f"LLM steps ({report.mode}): " + ", ".join(parts)


def show_llm_report(report) -> None:
    """What the run's LLM steps did: a one-line warning when no model could be loaded (the rules'
    result below being complete), then a summary line and the steps in a table."""
    if report is None:
        st.caption("LLM steps off: the rules' result only.")
        return
    if report.message:
        st.warning(md_line(f"{report.message}. The rules' result below is complete."))
    rows = step_rows(report)
    with st.expander(report_summary(report), expanded=any(r["status"] != "left out" for r in rows)):
        st.caption(md_text(report.model))
        if rows:  # columns that say nothing for any step are left out
            keep = [k for k in rows[0] if k in ("step", "status") or any(r[k] for r in rows)]
            st.dataframe([{k: r[k] for k in keep} for r in rows], hide_index=True)


# -------------------------------------------------------------------------------------------------
# asking

@dataclass
class Asked:
    """An answer as a page shows it: the pipelines.llm Answer and whether the documents' KV came
    from the engine's cache instead of being computed ("document reused")."""

    answer: object
    reused: bool = False


def document_reused(reuse: dict | None, answer=None) -> bool:
    """Whether a question took its documents from the engine's cache: no document computed and one
    loaded from the document cache, prompt tokens taken from the prefix cache, or cached prompt
    tokens on the answer."""
    reuse = reuse or {}
    if answer is not None and hasattr(answer, "cached_prompt_tokens"):
        # the answer's own request decides: its attribution pass reading the document back from the
        # prefix cache (which a first question's does) is not a document reused from before
        return answer.cached_prompt_tokens > 0 or (reuse.get("documents_computed", 0) == 0
                                                   and reuse.get("documents_loaded", 0) > 0)
    return reuse.get("documents_computed", 0) == 0 and (reuse.get("documents_loaded", 0) > 0
                                                         or reuse.get("prefix_hit_tokens", 0) > 0)


def _answers_key(key: str) -> str:
    return f"{key}_answers"


def clear_answers(key: str) -> None:
    """Forget the page's answers (a new document was analysed)."""
    st.session_state.pop(_answers_key(key), None)


def ask(docs: Sequence[Document], question: str, mode: str, *, stop_key: str | None = None,
        structure: Callable[[str], object] | None = None) -> Asked | None:
    """Answer `question` over `docs` with an LLMRun (`run.ask`), its progress drawn while it works;
    structure: the pipeline's answerer from its own structure (a question it answers needs no model)."""
    if structure is not None:
        answer = structure(question)
        if answer is not None:
            return Asked(answer, False)
    with RunProgress("Answering…", stop_key=stop_key) as prog:
        run = make_run(mode, on_progress=prog, cancel=prog.cancel)
        if run is None:
            prog.failed = True
            return None
        (answer,) = run.ask(list(docs), [question])
        rec = next((r for r in reversed(run.records) if r.step == "ask"), None)
        if answer.error:
            prog.failed, prog.done_label = True, "No answer"
        else:
            prog.done_label = f"Answered in {answer.seconds:,.1f} s"
    return Asked(answer, answer.error is None and rec is not None and document_reused(rec.reuse, answer))


def ask_box(key: str, docs: Sequence[Document], mode: str, *, names: dict[str, str] | None = None,
            page_image: Callable[[int, list], object] | None = None,
            structure: Callable[[str], object] | None = None) -> None:
    """"Ask about this document": the question box over `docs`, and the answers given on this page
    (newest first) with the passages they quote. names: how to call each document (by doc_id);
    page_image(page, boxes): a picture of that page with the boxes drawn (PDF input); structure:
    the pipeline's answerer from its own structure (`Pipeline.structure_answerer`)."""
    store = _answers_key(key)
    label = "Ask about these documents" if len(docs) > 1 else "Ask about this document"
    with st.expander(label, expanded=True, key=f"{key}_ask_open", icon=":material/question_answer:"):
        with st.form(f"{key}_ask_form", border=False):
            question = st.text_input("Question", key=f"{key}_ask_question",
                                     placeholder="Ask the local model a question about the text")
            submitted = st.form_submit_button("Ask", type="primary")
        st.caption("Answered evidence first: the passage that holds the answer, quoted and marked in the text, with a "
                   "calibrated confidence (found by retrieval and by the local model, which reads the whole text "
                   "once and keeps it for the next question). The model's own words appear only where the quote "
                   "carries them; \"not stated in the document\" is an answer.")
        if submitted:
            if not question.strip():
                st.info("Type a question first.")
            else:
                asked = ask(docs, question.strip(), mode, stop_key=f"{key}_ask_stop", structure=structure)
                if asked is not None:
                    st.session_state[store] = ([asked] + list(st.session_state.get(store, [])))[:MAX_ANSWERS]
        texts = {d.doc_id: d.text for d in docs}
        names = names or {d.doc_id: d.source_name or d.doc_id for d in docs}
        for k, asked in enumerate(st.session_state.get(store, [])):
            if k:
                st.divider()
            show_answer(asked.answer, texts, names, reused=asked.reused, page_image=page_image)


def answer_facts(answer, reused: bool = False) -> str:
    """One line: time to the first token, time in all, prompt size, and whether the document was reused."""
    parts = []
    if answer.ttft_s is not None:
        parts.append(f"first token {answer.ttft_s:,.2f} s")
    parts.append(f"{answer.seconds:,.1f} s in all")
    if answer.prompt_tokens:
        parts.append(f"prompt {answer.prompt_tokens:,} tokens")
    if reused:
        cached = f": {answer.cached_prompt_tokens:,} prompt tokens from the cache" if answer.cached_prompt_tokens else ""
        parts.append("document reused" + cached)
    return " · ".join(parts)


def show_answer(answer, texts: dict[str, str], names: dict[str, str] | None = None, *, reused: bool = False,
                page_image: Callable[[int, list], object] | None = None) -> None:
    """An evidence-first answer (a pipelines.llm Answer): the question; the answer (the value asked
    for, the model's words where the quote carries them, or the quote) with its calibrated
    confidence, or "not stated in the document" with the nearest passages, or the one-line error;
    its timings and the fallback line; each quoted passage marked in an excerpt of its document
    (texts: doc_id -> text), the value inside it marked more strongly. Model text the quotes do not
    carry is never shown."""
    names = names or {}
    st.markdown(f"**Q:** {md_text(answer.question)}")
    if answer.error:
        st.warning(md_line(f"No answer: {answer.error}"))
        return
    uncal = "" if getattr(answer, "calibrated", True) else " (not calibrated for this model)"
    conf = "" if answer.confidence is None else f" · confidence {answer.confidence:.0%}{uncal}"
    if answer.status == "not_stated":
        st.warning(md_line(f"Not stated in the document{conf}."))
    elif low_confidence(answer):
        st.warning(md_text(f"Low confidence ({answer.confidence:.0%}): check the quoted passage below. Possible answer: "
                           + " ".join(answer.text.split())))
    else:
        st.info(md_text(" ".join(answer.text.split())))
        bits = ["from the document's structure (exact), quoting the text that shows it"
                if answer.route == "structure" else f"quoted from the document{conf}"]
        if answer.model_supported and answer.model_text and answer.model_text.strip() != answer.text.strip():
            bits.append("in the model's words (carried by the quote): " + md_line(answer.model_text))
        st.caption(" · ".join(bits))
    st.caption(answer_facts(answer, reused))
    if answer.fallback:
        st.warning(md_line(f"The document {answer.fallback}; the answer rests on the part the model saw."))
    for w in getattr(answer, "warnings", None) or []:
        st.warning(md_line(w[0].upper() + w[1:] + "."))
    passages = answer.spans if answer.status != "not_stated" else answer.near_misses
    if not passages:
        return
    title = ("**Where the answer is** (the quoted passages, marked; the value in darker yellow)"
             if answer.status != "not_stated" else "**The nearest passages** (none holds the answer clearly enough)")
    st.markdown(title)
    ranks = {id(s): k + 1 for k, s in enumerate(passages)}
    by_doc: dict[str, list] = {}
    for s in passages:
        by_doc.setdefault(s.doc_id, []).append(s)
    windows = [(doc_id, *w) for doc_id, spans in by_doc.items() if doc_id in texts
               for w in excerpts(texts[doc_id], spans)]
    windows.sort(key=lambda w: min(ranks[id(s)] for s in w[3]))  # the best passage first
    value = answer.value if answer.status != "not_stated" else None
    for doc_id, a, b, inside in windows:
        text = texts[doc_id]
        first = inside[0]
        where = [names.get(doc_id, doc_id)]
        pages = sorted({s.page for s in inside if s.page})
        if pages:
            where.append("page " + ", ".join(map(str, pages)))
        probs = ", ".join(f"[{ranks[id(s)]}] {s.score:.0%}" for s in sorted(inside, key=lambda s: ranks[id(s)]))
        img = None
        if page_image is not None and first.page and any(s.bbox for s in inside):
            img = page_image(first.page, [s.bbox for s in inside if s.bbox and s.page == first.page])
        st.caption(md_text(" · ".join(where)) + f" · {probs} likely to hold the answer")
        v = (value.char_start, value.char_end) if value is not None and value.doc_id == doc_id else None
        st.html(excerpt_html(text, a, b, [(s.char_start, s.char_end, ranks[id(s)], s.score) for s in inside], v))
        if img is not None:
            with st.expander(f"Page {first.page} of the PDF, the quoted passages outlined"):
                st.image(img)


def excerpts(text: str, spans: Sequence, context: int = CONTEXT_CHARS) -> list[tuple[int, int, list]]:
    """Windows of `text` around the spans (`context` characters each side, cut at whitespace), the
    windows that overlap merged: [(start, end, spans inside)] in document order."""
    out: list[tuple[int, int, list]] = []
    for s in sorted(spans, key=lambda s: s.char_start):
        a = max(0, s.char_start - context)
        if a > 0:  # start after a whitespace, not inside a word
            m = _SPACE.search(text, a, s.char_start)
            a = m.end() if m else a
        b = min(len(text), s.char_end + context)
        if b < len(text):  # end before a whitespace
            cuts = [m.start() for m in _SPACE.finditer(text, s.char_end, b)]
            b = cuts[-1] if cuts else b
        if out and a <= out[-1][1]:
            pa, pb, inside = out[-1]
            out[-1] = (pa, max(pb, b), [*inside, s])
        else:
            out.append((a, b, [s]))
    return out


def excerpt_html(text: str, start: int, end: int, marks: Sequence[tuple[int, int, int, float]],
                 value: tuple[int, int] | None = None) -> str:
    """HTML of text[start:end] with each (char_start, char_end, rank, score) marked and numbered and
    the `value` (a character range inside a mark) marked more strongly; '…' where the excerpt cuts
    the document; every character of the text escaped."""
    out, pos = ["… " if start > 0 else ""], start
    for s, e, rank, score in sorted(marks):
        s, e = max(s, pos), min(e, end)
        if e <= s:
            continue
        out.append(html.escape(text[pos:s]))
        inner = html.escape(text[s:e])
        if value is not None and s <= value[0] and value[1] <= e:
            inner = (html.escape(text[s:value[0]]) + f'<b style="background:{VALUE}">'
                     + html.escape(text[value[0]:value[1]]) + "</b>" + html.escape(text[value[1]:e]))
        out.append(f'<mark style="background:{RESTS};padding:0 2px;border-radius:3px" '
                   f'title="quoted passage [{rank}]: {score:.0%} likely to hold the answer">'
                   f"{inner}</mark><sup>[{rank}]</sup>")
        pos = e
    out.append(html.escape(text[pos:end]))
    out.append(" …" if end < len(text) else "")
    body = "".join(out).replace("\n", "<br>")
    return ('<div style="line-height:1.7;font-size:0.95rem;border-left:3px solid #e5e7eb;padding:2px 0 2px 12px;'
            f'margin:2px 0 10px 0">{body}</div>')
