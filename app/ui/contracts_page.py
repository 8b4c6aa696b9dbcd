"""The contract versions page: two versions in (uploads or a bundled sample pair), the two side by
side aligned clause to clause with the redline inline, material changes first (each linked to
its row), filters by change type, JSON and HTML redline downloads; the LLM steps (off / auto / on:
materiality, explanations, the amendment in one paragraph) with their progress and report, and
"Ask about these documents" over both versions (app/ui/asking.py).

Tests call `run_input(file_a, file_b)` and `render(result)` directly, or put `(file_a, file_b)` in
`st.session_state[PENDING]` before an AppTest run.
"""

from __future__ import annotations

import html
from pathlib import Path

import streamlit as st

from app.ui import asking
from pipelines.contracts import ContractResult

SAMPLES = Path(__file__).resolve().parents[2] / "data" / "samples" / "contracts"
PENDING = "contracts_pending_input"
RESULT = "contracts_result"
DOCS = "contracts_documents"  # the two versions (Documents) the result was computed from, for questions
CHANGES = ["modified", "added", "deleted", "moved", "renumbered", "split", "merged", "unchanged"]


def load_versions(file_a: tuple[str, bytes], file_b: tuple[str, bytes]):
    """The two versions (name, bytes) as Documents "a" and "b". Raises IngestError for a bad file
    (IngestErrors naming both when both are bad)."""
    from app.ui.common import load_all

    return tuple(load_all([file_a, file_b], doc_ids=["a", "b"]))


def compare(doc_a, doc_b, semantic: bool = False, llm=None) -> ContractResult:
    """Compare the two versions; llm: a pipelines.llm.LLMRun for the LLM steps."""
    from pipelines.contracts import AlignConfig, compare_documents, warm_up

    cfg = AlignConfig(semantic=semantic)
    warm_up(cfg)
    return compare_documents(doc_a, doc_b, cfg, llm=llm)


def run_input(file_a: tuple[str, bytes], file_b: tuple[str, bytes], semantic: bool = False, llm=None) -> ContractResult:
    """Ingest two uploaded versions (name, bytes) and compare them. Raises IngestError for a bad file
    (IngestErrors naming both when both are bad)."""
    return compare(*load_versions(file_a, file_b), semantic=semantic, llm=llm)


def version_names(docs) -> dict[str, str]:
    """How the answers name the versions: 'A (earlier): v1.txt'."""
    label = {"a": "A (earlier)", "b": "B (later)"}
    return {d.doc_id: f"{label.get(d.doc_id, d.doc_id)}: {d.source_name or d.doc_id}" for d in docs}


def sample_pairs() -> dict[str, tuple[Path, Path]]:
    """The bundled sample pairs by id."""
    if not SAMPLES.is_dir():
        return {}
    from pipelines.contracts import ContractsPipeline

    return {inp.input_id: (inp.paths[0], inp.paths[1]) for inp in ContractsPipeline().discover(SAMPLES)}


def render(result: ContractResult) -> None:
    """Counts, material changes first (linked), filters, and the two versions side by side."""
    from app.render.contracts import CSS, explanation_line, materiality_note, row_html

    s = result.stats
    cols = st.columns([1.7, 1, 1, 1, 1.5, 1])  # room for '107→107'
    for col, (label, key) in zip(cols, [("Clauses A→B", None), ("Modified", "modified"), ("Added", "added"),
                                        ("Deleted", "deleted"), ("Moved / renumbered", None), ("Material", "material")],
                                 strict=True):
        if label == "Clauses A→B":
            col.metric(label, f"{s['clauses_a']}→{s['clauses_b']}")
        elif key is None:
            col.metric(label, f"{s['moved']} / {s['renumbered']}")
        else:
            col.metric(label, s[key])

    present = [c for c in CHANGES if s.get(c, 0)]
    default = [c for c in present if c != "unchanged"] or present
    chosen = st.multiselect("Show changes of type", present, default=default, key="contracts_filter")
    rows = [(k, r) for k, r in enumerate(result.alignment) if r.change in chosen]
    visible = {k for k, _ in rows}

    if result.amendment is not None:  # LLM step contracts.summary
        st.subheader("The amendment in one paragraph")
        paragraph = " ".join(
            html.escape(sent.text) + "".join(f' <a href="#row-{r}"><sup>[{html.escape(result.where(result.alignment[r]))}]'
                                             f"</sup></a>" for r in sent.rows if r in visible)
            for sent in result.amendment.sentences) or html.escape(result.amendment.text)
        who = "" if result.amendment.kept else ('<br><span style="color:#6b7280;font-size:12px">written by the rules: '
                                                "the model's paragraph was not grounded in the changes</span>")
        st.html(f'<p style="font-size:14px">{paragraph}{who}</p>')

    st.subheader("Material changes first")
    if not result.summary:
        st.success("No changes between the two versions.")
    items = []
    for item in result.summary:
        mark = "⚑ " if item.material else ""
        weight = "font-weight:600" if item.material else ""
        text = html.escape(item.text)
        # each entry jumps to its row in the side-by-side view (when the filter shows that row)
        body = f'<a href="#row-{item.row}">{mark}{text}</a>' if item.row in visible else f"{mark}{text}"
        for line in (explanation_line(item), materiality_note(item)):  # the LLM steps' words, when they ran
            if line:
                body += f'<div style="font-weight:400;color:#374151">{html.escape(line)}</div>'
        items.append(f'<li style="{weight}">{body}</li>')
    if items:
        st.html('<ul style="font-size:13px">' + "".join(items) + "</ul>")

    st.subheader("Side by side")
    da, db = result.documents["a"].info, result.documents["b"].info
    table = [f"<style>{CSS}</style>", '<table class="rl"><tr><th></th>',
             f"<th>A: {html.escape(da.source_name)}</th><th>B: {html.escape(db.source_name)}</th></tr>"]
    table += [row_html(k, r, result.where(r)) for k, r in rows]
    table.append("</table>")
    st.caption(f"{len(rows)} of {len(result.alignment)} aligned rows shown")
    st.html("".join(table))


def page() -> None:
    st.title("Contract versions")
    st.caption("Two versions of an agreement: every clause aligned, every change explained, material changes first.")
    left, right = st.columns(2)
    up_a = left.file_uploader("Version A (earlier)", type=["txt", "md", "docx", "pdf"], key="contracts_a")
    up_b = right.file_uploader("Version B (later)", type=["txt", "md", "docx", "pdf"], key="contracts_b")
    samples = sample_pairs()
    pick = st.selectbox("…or a bundled sample pair", ["(none)"] + sorted(samples), key="contracts_sample")
    semantic = st.checkbox("Blend in MiniLM similarity (English; off by default — it did not improve the measured "
                           "alignment)", key="contracts_semantic")
    mode = asking.mode_choice("contracts")
    chosen = st.session_state.pop(PENDING, None)
    if st.button("Compare", type="primary", key="contracts_run"):
        if pick != "(none)":
            pa, pb = samples[pick]
            chosen = ((pa.name, pa.read_bytes()), (pb.name, pb.read_bytes()))
        elif up_a is not None and up_b is not None:
            chosen = ((up_a.name, up_a.getvalue()), (up_b.name, up_b.getvalue()))
        else:
            st.warning("Choose two versions (or a sample pair) first.")
    if chosen is not None:
        from pipelines.documents import IngestError

        st.session_state.pop(RESULT, None)
        st.session_state.pop(DOCS, None)
        asking.clear_answers("contracts")
        try:
            docs = load_versions(chosen[0], chosen[1])
        except IngestError as exc:
            from app.ui.common import show_ingest_error

            show_ingest_error(exc)
        else:
            with asking.RunProgress("Aligning clauses…", stop_key=None if mode == "off" else "contracts_stop") as prog:
                run = asking.make_run(mode, prog, prog.cancel)
                asking.keep(DOCS, docs)
                asking.keep(RESULT, compare(*docs, semantic=semantic, llm=run))
    result = st.session_state.get(RESULT)
    if result is not None:
        from app.export import to_json
        from app.render.contracts import redline_html

        asking.show_llm_report(result.llm)
        docs = st.session_state.get(DOCS)
        if docs:
            from pipelines.contracts import ContractsPipeline

            asking.ask_box("contracts", list(docs), mode, names=version_names(docs),
                           structure=ContractsPipeline().structure_answerer(result, list(docs)))
        c1, c2 = st.columns(2)
        c1.download_button("Download JSON", to_json(result), file_name="contracts.json", mime="application/json",
                           key="contracts_download_json")
        c2.download_button("Download HTML redline", redline_html(result), file_name="redline.html", mime="text/html",
                           key="contracts_download_html")
        render(result)
