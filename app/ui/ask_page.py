"""The Ask page: questions over one long document with the local engine. It shows the answer, what
the model saw when the document did not fit (the fallback's report, with the kept text marked in
the document), and the time to the first token. A second question over the same document reuses
its KV from the prefix cache of the engine, which the page keeps for the whole server session.

Tests call `run_input(name, data, question, fallback)` directly, or put those four in
`st.session_state[PENDING]` before an AppTest run.
"""

from __future__ import annotations

import time

import streamlit as st

from app import ask as asking
from app.ui.common import document_input, highlight

PENDING = "ask_pending_input"
RESULT = "ask_result"
KEPT = "#bbf7d0"


@st.cache_resource(show_spinner="Loading the local model…")
def _llm(max_model_len: int | None = None):
    from engine import LLM, SchedulerConfig

    return LLM(scheduler=SchedulerConfig(max_num_seqs=4), max_model_len=max_model_len)


def run_input(name: str, data: bytes, question: str, fallback: str = "retrieval", max_tokens: int = 96,
              max_model_len: int | None = None) -> dict:
    """Ingest the document and answer `question`. Raises IngestError (one line naming the file) or the
    engine's EngineError / ValueError (one line) for bad input."""
    from pipelines.documents import load_bytes

    doc = load_bytes(data, name)
    policy = asking.policy_for(fallback)
    llm = _llm(max_model_len)
    t0 = time.perf_counter()
    out, report = asking.ask(llm, doc.text, question, policy, max_tokens)
    seconds = time.perf_counter() - t0
    return {"name": name, "text": doc.text, "question": question, "answer": out.text.strip(), "out": out,
            "report": report, "seconds": seconds, "summary": asking.summary(out, report, seconds)}


def render(res: dict) -> None:
    out, report = res["out"], res["report"]
    st.subheader("Answer")
    st.markdown(f"**Q:** {res['question']}")
    st.info(res["answer"] or "(empty answer)")
    st.caption(res["summary"])
    c1, c2, c3, c4 = st.columns(4)
    c1.metric("Prompt tokens", f"{report.prompt_tokens:,}")
    c2.metric("Document tokens dropped", f"{report.tokens_dropped:,}")
    c3.metric("Key-entity retention", f"{report.key_entity_retention:.0%}")
    ttft = out.metrics.get("ttft_s")
    c4.metric("First token", f"{ttft:.2f} s" if ttft is not None else "—")
    if report.fallback_triggered:
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
    marks = [(a, b, KEPT, "seen by the model") for a, b in report.kept_spans] if report.fallback_triggered else []
    if marks:
        st.markdown(f'<mark style="background:{KEPT}">seen by the model</mark>', unsafe_allow_html=True)
    st.html(highlight(res["text"], 0, marks))


def _report_json(res: dict) -> str:
    import json

    out = res["out"]
    return json.dumps({"document": res["name"], "question": res["question"], "answer": res["answer"],
                       "finish_reason": out.finish_reason, "cached_prompt_tokens": out.cached_tokens,
                       "metrics": out.metrics, "fallback": res["report"].to_dict()},
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
    chosen = document_input("contracts", "ask")
    if chosen is not None:
        if not question.strip():
            st.info("Type a question first.")
        else:
            pending = (*chosen, question, fallback, max_tokens)
    if pending is not None:
        from engine import EngineError
        from pipelines.documents import IngestError

        try:
            with st.spinner("Reading the document and answering…"):
                st.session_state[RESULT] = run_input(*pending)
        except (IngestError, EngineError, ValueError) as exc:
            st.error(str(exc))
    res = st.session_state.get(RESULT)
    if res is not None:
        render(res)
