"""The patent claim-tree page: input -> tree drawing, claim viewer with its parts highlighted,
findings with their spans, JSON download; the LLM steps (off / auto / on: plain-language claim
summaries) with their progress and report, and "Ask about this document" (app/ui/asking.py).

Tests call `run_input(name, data)` directly, or put `(name, data)` in
`st.session_state[PENDING]` before an AppTest run; people use the upload/paste/sample widgets.
"""

from __future__ import annotations

import streamlit as st

from app.export import to_json
from app.ui import asking
from app.ui.common import document_input, highlight, ingest, md_line

PENDING = "patents_pending_input"
RESULT = "patents_result"
COLOURS = {"preamble": "#dbeafe", "transition": "#fde68a", "element": "#dcfce7", "reference": "#fbcfe8", "finding": "#fecaca"}


@st.cache_resource
def _pipeline():
    from pipelines.patents import PatentsPipeline

    return PatentsPipeline()


def run_input(name: str, data: bytes, llm=None):
    """Ingest and analyse one document (llm: a pipelines.llm.LLMRun for the LLM steps); returns
    (result, document), or None after showing the error."""
    doc = ingest(name, data)
    if doc is None:
        return None
    return _pipeline().run_documents([doc], llm=llm), doc


def render(result, doc) -> None:
    from app.render.patents import counts_line, to_dot

    claims = result.claims
    s = result.stats
    counts = s.claim_counts
    c1, c2, c3, c4, c5 = st.columns(5)
    c1.metric("Claims", s.n_active)
    c2.metric("Independent", s.n_independent)
    c3.metric("Multiple dependent", s.n_multiple_dependent)
    c4.metric("For USPTO fees", counts.total_for_fees if counts else s.n_active)
    c5.metric("Findings", len(result.findings))
    if counts is not None:
        st.caption(f"{counts_line(result)}. Counting rule: {counts.rule}.")
    st.download_button(
        "Download JSON", to_json(result), file_name=f"{doc.doc_id}.patents.json", mime="application/json", key="patents_download"
    )

    st.subheader("Claim tree")
    st.graphviz_chart(to_dot(result))
    if getattr(result, "claim_summaries", None):
        from app.render.patents import summary_rows

        with st.expander("Plain-language summaries (LLM step patents.claim_summaries)"):
            st.dataframe(summary_rows(result), hide_index=True)

    st.subheader("Claim")
    numbers = [c.number for c in claims]
    if numbers:
        chosen = st.selectbox("Choose a claim", numbers, format_func=lambda n: _claim_label(result, n), key="patents_claim")
        claim = next(c for c in claims if c.number == chosen)
        marks = []
        if claim.preamble:
            marks.append((claim.preamble.char_start, claim.preamble.char_end, COLOURS["preamble"], "preamble"))
        if claim.transition:
            marks.append((claim.transition.char_start, claim.transition.char_end, COLOURS["transition"], "transition"))
        for ref in getattr(claim, "references", []) or []:
            marks.append((ref.span.char_start, ref.span.char_end, COLOURS["reference"], "reference"))
        for el in claim.elements:
            marks.append((el.char_start, el.char_end, COLOURS["element"], "element"))
        st.markdown(
            " ".join(f'<mark style="background:{c}">{k}</mark>' for k, c in COLOURS.items() if k != "finding"),
            unsafe_allow_html=True,
        )
        st.html(highlight(claim.span.text, claim.span.char_start, marks))
        if claim.limitation is not None and not claim.independent:
            st.markdown(f"**Adds:** {md_line(claim.limitation.text)}")  # document text: escaped
        from app.render.patents import summaries_markdown  # the LLM step's summary, when it ran

        summary = summaries_markdown(result, chosen)
        if summary:
            st.markdown(summary, unsafe_allow_html=True)
        if any(p.parts for p in claim.parts):
            st.markdown(_parts_markdown(claim.parts))
        meta = f"status: {claim.status} · category: {claim.category} · "
        meta += "independent" if claim.independent else f"depends on {', '.join(map(str, claim.depends_on))}"
        st.caption(meta)
        own = [f for f in result.findings if chosen in f.claims]
        for f in own:
            (st.info if f.severity == "info" else st.warning)(f"{f.code}: {f.message}")

    st.subheader("Findings")
    if not result.findings:
        st.success("No findings: the claim set is consistent.")
    for f in result.findings:
        with st.expander(f"{f.code} · claims {', '.join(map(str, f.claims))}: {f.message}"):
            for s in f.spans:
                st.html(
                    f"<p>page {s.page}, chars {s.char_start}–{s.char_end}: "
                    + highlight(s.text, s.char_start, [(s.char_start, s.char_end, COLOURS["finding"], f.code)])
                    + "</p>"
                )


def _claim_label(result, number: int) -> str:
    from pipelines.patents import claim_label

    claim = next(c for c in result.claims if c.number == number)
    return f"{number}. {claim_label(claim, 10, 20)}"


def _parts_markdown(parts, depth: int = 0) -> str:
    """A claim's elements as a nested Markdown list (an element ending in a colon holds its items)."""
    lines = []
    for p in parts:
        text = md_line(p.span.text)  # document text: escaped
        lines.append("  " * depth + "- " + text)
        if p.parts:
            lines.append(_parts_markdown(p.parts, depth + 1))
    return "\n".join(lines)


def page() -> None:
    st.title("Patent claim trees")
    st.caption("Claims parsed into a dependency tree, with the preamble, transition and elements of each claim and validation findings.")
    mode = asking.mode_choice("patents")
    chosen = st.session_state.pop(PENDING, None) or document_input("patents", "patents")
    if chosen is not None:
        doc = ingest(*chosen)
        st.session_state.pop(RESULT, None)
        asking.clear_answers("patents")
        if doc is not None:
            with asking.RunProgress("Parsing claims…", stop_key=None if mode == "off" else "patents_stop") as prog:
                run = asking.make_run(mode, prog, prog.cancel)
                asking.keep(RESULT, (_pipeline().run_documents([doc], llm=run), doc))
    out = st.session_state.get(RESULT)
    if out:
        result, doc = out
        asking.show_llm_report(result.llm)
        asking.ask_box("patents", [doc], mode, structure=_pipeline().structure_answerer(result, [doc]))
        render(result, doc)
