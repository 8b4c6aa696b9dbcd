"""The Ask page: questions over one long document with the local engine. It shows the answer, what
the model saw when the document did not fit (the fallback's report, with the kept text marked in
the document), and the time to the first token, with a progress bar (tokens done, time left) while
it works. The engine is the process's one handle (pipelines.llm.get_engine, kept by
st.cache_resource), so a second question over the same document takes the document's KV from its
cache instead of computing it again.

Tests call `run_input(name, data, question, fallback, ...)` directly, or put its positional
arguments in `st.session_state[PENDING]` before an AppTest run.
"""

from __future__ import annotations

import time

import streamlit as st

from app import ask as asking
from app.ui.common import document_input, highlight

PENDING = "ask_pending_input"
RESULT = "ask_result"
KEPT = "#bbf7d0"
RESTS = "#fde68a"


@st.cache_resource(show_spinner="Loading the local model…")
def _llm(max_model_len: int | None = None):
    """The process's engine (pipelines.llm.get_engine), kept for the server session."""
    from pipelines.llm import get_engine

    return get_engine(asking.settings(max_model_len=max_model_len))


def run_input(name: str, data: bytes, question: str, fallback: str = "retrieval", max_tokens: int = 96,
              max_model_len: int | None = None, attribute: bool = False, on_progress=None) -> dict:
    """Ingest the document and answer `question` (attribute: also find the sentences the answer
    attends to most, one more pass over the document; on_progress: the LLM layer's Progress after
    every engine step). Raises IngestError (one line naming the file), EngineUnavailable or the engine's
    EngineError / ValueError (one line) for bad input."""
    from pipelines.documents import load_bytes

    doc = load_bytes(data, name)
    policy = asking.policy_for(fallback)
    llm = _llm(max_model_len)
    t0 = time.perf_counter()
    batch = asking.ask(llm, doc, [question], policy, max_tokens, on_progress=on_progress, attribute=attribute)
    seconds = time.perf_counter() - t0
    item = batch.items[0]
    return {"name": name, "text": doc.text, "question": question, "answer": item.text, "item": item,
            "batch": batch, "report": item.fallback, "seconds": seconds, "summary": asking.summary(item, seconds)}


def render(res: dict) -> None:
    item, report = res["item"], res["report"]
    st.subheader("Answer")
    st.markdown(f"**Q:** {res['question']}")
    if item.error:
        st.error(item.error)
    else:
        st.info(res["answer"] or "(empty answer)")
    st.caption(res["summary"])
    for a in item.spans:
        st.caption(f"Rests on (page {a.source.page}, {a.score:.0%} of the answer's attention over the sentences): "
                   f"“{a.source.text[:300]}”")
    c1, c2, c3, c4 = st.columns(4)
    c1.metric("Prompt tokens", f"{item.metrics.get('prompt_tokens', 0):,}")
    c2.metric("Document tokens dropped", f"{report.tokens_dropped:,}" if report is not None else "0")
    retention = report.key_entity_retention if report is not None and report.fallback_triggered else None
    c3.metric("Key-entity retention", f"{retention:.0%}" if retention is not None else "100%" if report is None else "—")
    ttft = item.metrics.get("ttft_s")
    c4.metric("First token", f"{ttft:.2f} s" if ttft is not None else "—")
    if report is not None and report.fallback_triggered:
        how = report.strategy + (f" ({report.truncate_side})" if report.truncate_side else "")
        st.warning(f"The document did not fit ({report.reason}: at most {report.budget_tokens:,} prompt tokens); "
                   f"served by {how}. The model saw the marked text only.")
        if report.lost_entities:
            st.caption("Named entities and numbers the model did not see: " + ", ".join(report.lost_entities))
        if report.strategy == "map_reduce":
            for c in report.chunks:
                with st.expander(f"Part {c.index + 1}: tokens {c.token_start:,}–{c.token_end:,}"):
                    st.write(c.answer or "(empty)")
    st.download_button("Download the report (JSON)", _report_json(res), file_name="ask-report.json",
                       mime="application/json", key="ask_download")
    st.subheader("Document")
    marks = [(a, b, KEPT, "seen by the model") for a, b in report.kept_spans] if report is not None and report.fallback_triggered else []
    if marks:
        st.markdown(f'<mark style="background:{KEPT}">seen by the model</mark>', unsafe_allow_html=True)
    rests = [(a.source.char_start, a.source.char_end, RESTS, f"the answer rests on this ({a.score:.0%})") for a in item.spans]
    if rests:
        st.markdown(f'<mark style="background:{RESTS}">the answer rests on this</mark>', unsafe_allow_html=True)
        marks = rests + marks
    st.html(highlight(res["text"], 0, marks))


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
    st.caption("Questions over one long document with the local model (Gemma 3 270M by default: a small model, so "
               "read its answers as a demonstration). When the document does not fit, the page says what was left out.")
    pending = st.session_state.pop(PENDING, None)
    question = st.text_input("Question", key="ask_question", placeholder="e.g. which law governs this agreement?")
    c1, c2 = st.columns(2)
    fallback = c1.selectbox("When the document does not fit", asking.FALLBACKS, key="ask_fallback",
                            help="retrieval keeps the chunks most relevant to the question; truncate drops the head, "
                                 "tail or middle; map_reduce asks every part and combines the answers; error refuses.")
    max_tokens = c2.slider("Answer length (tokens)", 16, 256, 96, step=16, key="ask_max_tokens")
    attribute = st.checkbox("Mark the sentences the answer rests on (one more pass over the document)",
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

        try:
            with st.status("Reading the document and answering…", expanded=True) as status:
                bar = st.progress(0.0, text="starting")

                def progress(p) -> None:
                    bar.progress(p.fraction, text=progress_text(p))

                st.session_state[RESULT] = run_input(*pending, on_progress=progress)
                status.update(label="Answered", state="complete", expanded=False)
        except (IngestError, EngineError, EngineUnavailable, ValueError) as exc:
            st.error(str(exc))
    res = st.session_state.get(RESULT)
    if res is not None:
        render(res)
