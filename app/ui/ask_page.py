"""The Ask page: questions over one long document with the local engine. It shows the answer with
the sentences it rests on marked in excerpts of the document (app/ui/asking.py's `show_answer`, the
same view as every pipeline page's "Ask about this document"), what the model saw when the
document did not fit (the fallback's report; the whole document with the kept text marked, folded
away), and the time to the first token, with a progress bar (model load, then tokens done and the
time left) while it works. The engine is the process's one handle (pipelines.llm.get_engine, shared
with the pipeline pages), so a second question over the same document takes the document's KV from
its cache instead of computing it again ("document reused").

Tests call `run_input(name, data, question, fallback, ...)` directly, or put its positional
arguments in `st.session_state[PENDING]` before an AppTest run.
"""

from __future__ import annotations

import time

import streamlit as st

from app import ask as asking
from app.ui import asking as answers
from app.ui.common import document_input, highlight, md_line

PENDING = "ask_pending_input"
RESULT = "ask_result"
KEPT = "#bbf7d0"


def _llm(max_model_len: int | None = None, on_progress=None):
    """The process's engine for the page's settings (pipelines.llm.get_engine: one per process and
    settings, shared with every page); on_progress(step, p) hears ("loading the model", None) before
    a load and ("loading the model", False) after it."""
    from pipelines.llm import get_engine

    settings = asking.settings(max_model_len=max_model_len)
    llm = answers.loaded_engine(settings)
    if llm is not None:
        return llm
    if on_progress is not None:
        on_progress("loading the model", None)
    try:
        return get_engine(settings)
    finally:
        if on_progress is not None:
            on_progress("loading the model", False)


def run_input(name: str, data: bytes, question: str, fallback: str = "retrieval", max_tokens: int = 96,
              max_model_len: int | None = None, attribute: bool = False, on_progress=None, cancel=None) -> dict:
    """Ingest the document and answer `question` (attribute: also find the sentences the answer
    attends to most, one more pass over the document; on_progress(step, p): the model load, then the
    LLM layer's Progress after every engine step; cancel: a threading.Event that stops the work).
    Raises IngestError (one line naming the file), EngineUnavailable or the engine's EngineError /
    ValueError (one line) for bad input."""
    from pipelines.documents import load_bytes

    doc = load_bytes(data, name)
    policy = asking.policy_for(fallback)
    llm = _llm(max_model_len, on_progress)
    t0 = time.perf_counter()
    step = None if on_progress is None else (lambda p: on_progress("ask", p))
    batch = asking.ask(llm, doc, [question], policy, max_tokens, on_progress=step, cancel=cancel, attribute=attribute)
    seconds = time.perf_counter() - t0
    item = batch.items[0]
    return {"name": name, "doc_id": doc.doc_id, "text": doc.text, "question": question, "answer": item.text,
            "item": item, "batch": batch, "report": item.fallback, "seconds": seconds,
            "summary": asking.summary(item, seconds)}


def as_answer(res: dict):
    """The page's result as a pipelines.llm Answer, for the shared answer view (the fallback is shown
    by the page itself, in more detail)."""
    from pipelines.llm.run import Answer, AnswerSpan

    item = res["item"]
    error = item.error
    if error is None and not item.text.strip():
        error = "the model gave an empty answer"
    ttft = item.metrics.get("ttft_s")
    return Answer(question=res["question"], text=item.text.strip(), error=error, finish_reason=item.finish_reason,
                  spans=[AnswerSpan(**a.source.model_dump(), score=round(a.score, 4)) for a in item.spans],
                  prompt_tokens=int(item.metrics.get("prompt_tokens", 0)),
                  cached_prompt_tokens=int(item.metrics.get("cached_prompt_tokens", 0) or 0),
                  ttft_s=None if ttft is None else round(float(ttft), 3), seconds=round(res["seconds"], 3))


def render(res: dict) -> None:
    item, report = res["item"], res["report"]
    st.subheader("Answer")
    answer = as_answer(res)
    answers.show_answer(answer, {res["doc_id"]: res["text"]}, {res["doc_id"]: res["name"]},
                        reused=answer.error is None and answers.document_reused(res["batch"].reuse, answer))
    if report is not None and report.fallback_triggered:  # what the model did not see
        c1, c2, c3 = st.columns(3)
        c1.metric("Prompt tokens", f"{item.metrics.get('prompt_tokens', 0):,}")
        c2.metric("Document tokens dropped", f"{report.tokens_dropped:,}")
        retention = report.key_entity_retention
        c3.metric("Key-entity retention", f"{retention:.0%}" if retention is not None else "—")
        how = report.strategy + (f" ({report.truncate_side})" if report.truncate_side else "")
        st.warning(f"The document did not fit ({report.reason}: at most {report.budget_tokens:,} prompt tokens); "
                   f"served by {how}. The model saw the marked text only.")
        if report.lost_entities:
            st.caption("Named entities and numbers the model did not see: " + md_line(", ".join(report.lost_entities)))
        if report.strategy == "map_reduce":
            for c in report.chunks:
                with st.expander(f"Part {c.index + 1}: tokens {c.token_start:,}–{c.token_end:,}"):
                    st.text(c.answer or "(empty)")  # model text: shown as text
        with st.expander("The whole document, with the text the model saw marked"):
            st.markdown(f'<mark style="background:{KEPT}">seen by the model</mark>', unsafe_allow_html=True)
            st.html(highlight(res["text"], 0, [(a, b, KEPT, "seen by the model") for a, b in report.kept_spans]))
    st.download_button("Download the report (JSON)", _report_json(res), file_name="ask-report.json",
                       mime="application/json", key="ask_download")


def progress_text(p) -> str:
    """The progress bar's line: tokens done of the total, elapsed, time left."""
    eta = p.eta_s
    left = "estimating the time left" if eta is None else f"about {eta:,.0f} s left"
    return f"{p.tokens_done:,} of {p.tokens_total:,} tokens · {p.elapsed_s:,.0f} s · {left}"


def _report_json(res: dict) -> str:
    import json

    item = res["item"]
    return json.dumps({"document": res["name"], "question": res["question"], "answer": res["answer"],
                       "finish_reason": item.finish_reason, "error": item.error,
                       "cached_prompt_tokens": item.metrics.get("cached_prompt_tokens", 0),
                       "metrics": item.metrics, "fallback": asking.fallback_dict(item)},
                      ensure_ascii=False, indent=2, default=str)


def page() -> None:
    st.title("Ask a document")
    answers.show_stopped_note()
    st.caption("Questions over one long document with the local model (Gemma 3 270M by default: a small model, so "
               "read its answers as a demonstration). When the document does not fit, the page says what was left out.")
    pending = st.session_state.pop(PENDING, None)
    question = st.text_input("Question", key="ask_question", placeholder="e.g. which law governs this agreement?")
    c1, c2 = st.columns(2)
    fallback = c1.selectbox("When the document does not fit", asking.FALLBACKS, key="ask_fallback",
                            help="retrieval keeps the chunks most relevant to the question; truncate drops the head, "
                                 "tail or middle; map_reduce asks every part and combines the answers; error refuses.")
    max_tokens = c2.slider("Answer length (tokens)", 16, 256, 96, step=16, key="ask_max_tokens")
    attribute = st.checkbox("Mark the sentences the answer rests on (one more pass over the document)", value=True,
                            key="ask_attribute")
    chosen = document_input("contracts", "ask")
    if chosen is not None:
        if not question.strip():
            st.info("Type a question first.")
        else:
            pending = (*chosen, question, fallback, max_tokens, None, attribute)
    if pending is not None:
        from engine import EngineError
        from pipelines.documents import IngestError
        from pipelines.llm import EngineUnavailable

        st.session_state.pop(RESULT, None)
        try:
            with answers.RunProgress("Reading the document and answering…", stop_key="ask_stop") as prog:
                res = run_input(*pending, on_progress=prog, cancel=prog.cancel)
                answers.keep(RESULT, res)
                prog.done_label = f"Answered in {res['seconds']:,.1f} s"
        except (IngestError, EngineError, EngineUnavailable, ValueError) as exc:
            st.error(md_line(str(exc)))
    res = st.session_state.get(RESULT)
    if res is not None:
        render(res)
