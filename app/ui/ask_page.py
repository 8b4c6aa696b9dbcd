"""The Ask page: questions over one long document with the local engine, answered evidence first
(`LLMRun.ask`): the quoted passage that holds the answer marked in an excerpt of the document, the
value inside it, the calibrated confidence, "not stated in the document" with the nearest passages
(app/ui/asking.py's `show_answer`, the same view as every pipeline page's "Ask about this
document"), what the model saw when the
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


def run_input(name: str, data: bytes, question: str, fallback: str = "retrieval", max_tokens: int = 48,
              max_model_len: int | None = None, on_progress=None, cancel=None) -> dict:
    """Ingest the document and answer `question` evidence first (`LLMRun.ask`: the passage that
    holds the answer, the value inside it, the model's words only where the quote carries them;
    on_progress(step, p): the model load, then the LLM layer's Progress; cancel: a threading.Event
    that stops the work). Raises IngestError (one line naming the file), EngineUnavailable or the
    engine's EngineError / ValueError (one line) for bad input."""
    from pipelines.documents import load_bytes
    from pipelines.llm import LLMRun

    doc = load_bytes(data, name)
    policy = asking.policy_for(fallback)
    llm = _llm(max_model_len, on_progress)
    t0 = time.perf_counter()
    run = LLMRun("off", asking.settings(max_model_len=max_model_len), engine=llm, on_progress=on_progress,
                 cancel=cancel)
    (answer,) = run.ask([doc], [question], fallback=policy, max_tokens=max_tokens)
    seconds = time.perf_counter() - t0
    record = run.records[-1] if run.records else None
    return {"name": name, "doc_id": doc.doc_id, "text": doc.text, "question": question, "answer": answer,
            "reuse": dict(record.reuse) if record is not None else {}, "seconds": seconds}


def render(res: dict) -> None:
    answer = res["answer"]
    report = answer.fallback_report
    st.subheader("Answer")
    shown = answer.model_copy(update={"fallback": None})  # the page says what did not fit, in more detail, below
    answers.show_answer(shown, {res["doc_id"]: res["text"]}, {res["doc_id"]: res["name"]},
                        reused=answer.error is None and answers.document_reused(res["reuse"], answer))
    if report is not None and report.get("fallback_triggered"):  # what the model did not see
        c1, c2, c3 = st.columns(3)
        c1.metric("Prompt tokens", f"{answer.prompt_tokens:,}")
        c2.metric("Document tokens dropped", f"{report['tokens_dropped']:,}")
        retention = report.get("key_entity_retention")
        c3.metric("Key-entity retention", f"{retention:.0%}" if retention is not None else "—")
        how = report["strategy"] + (f" ({report['truncate_side']})" if report.get("truncate_side") else "")
        st.warning(f"The document did not fit ({report['reason']}: at most {report['budget_tokens']:,} prompt "
                   f"tokens); the model's reading was served by {how}. The marked text is what it saw.")
        if report.get("lost_entities"):
            st.caption("Named entities and numbers the model did not see: "
                       + md_line(", ".join(report["lost_entities"])))
        with st.expander("The whole document, with the text the model saw marked"):
            st.markdown(f'<mark style="background:{KEPT}">seen by the model</mark>', unsafe_allow_html=True)
            st.html(highlight(res["text"], 0, [(a, b, KEPT, "seen by the model") for a, b in report["kept_spans"]]))
    st.download_button("Download the answer (JSON)", _report_json(res), file_name="ask-answer.json",
                       mime="application/json", key="ask_download")


def progress_text(p) -> str:
    """The progress bar's line: tokens done of the total, elapsed, time left."""
    eta = p.eta_s
    left = "estimating the time left" if eta is None else f"about {eta:,.0f} s left"
    return f"{p.tokens_done:,} of {p.tokens_total:,} tokens · {p.elapsed_s:,.0f} s · {left}"


def _report_json(res: dict) -> str:
    import json

    return json.dumps({"document": res["name"], **res["answer"].model_dump(mode="json")},
                      ensure_ascii=False, indent=2, default=str)


def page() -> None:
    st.title("Ask a document")
    answers.show_stopped_note()
    st.caption("Questions over one long document with the local model. The answer is the passage that holds it, "
               "quoted from the document with its page, the value asked for marked inside it, and a calibrated "
               "confidence; the model's own words appear only where the quote carries them, and \"not stated in "
               "the document\" is an answer. When the document does not fit, the page says what was left out.")
    pending = st.session_state.pop(PENDING, None)
    question = st.text_input("Question", key="ask_question", placeholder="e.g. which law governs this agreement?")
    c1, c2 = st.columns(2)
    fallback = c1.selectbox("When the document does not fit", asking.FALLBACKS, key="ask_fallback",
                            help="retrieval keeps the chunks most relevant to the question; truncate drops the head, "
                                 "tail or middle; map_reduce asks every part and combines the answers; error refuses.")
    max_tokens = c2.slider("The model's answer at most (tokens)", 16, 256, 48, step=16, key="ask_max_tokens",
                           help="The model's own words are shown only where the quoted passage carries them.")
    chosen = document_input("contracts", "ask")
    if chosen is not None:
        if not question.strip():
            st.info("Type a question first.")
        else:
            pending = (*chosen, question, fallback, max_tokens, None)
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
