"""The Review table page: the same questions asked of every input of a folder (a folder on this
machine, or uploaded files), one row per input, one column per question (app/review.py).

The table fills in as the inputs are answered (a bar for the input being read: tokens done of the
total and the time left; a line for the inputs done of all). Choosing a row and a question shows
that cell, evidence first: the answer (or "not stated in the document"), its calibrated
confidence, what was read when the input did not fit, and the quoted passages (or the nearest
ones) marked in excerpts of their document, the value inside darker.
CSV (the grid, and one line per cell with its sources), JSON (schema review/2.1) and XLSX
downloads. Row files are kept in a folder of this session, so asking one more question computes
only that column.

Tests put (pipeline, folder or None, [(name, bytes)] uploads, questions text) in
`st.session_state[PENDING]` before an AppTest run.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import streamlit as st

from app import review
from app.ui import asking
from app.ui.common import md_line, md_text
from pipelines.llm.evidence import low_confidence

PENDING = "review_pending"
STATE = "review_state"  # {"pipeline", "inputs": {input_id: PipelineInput}, "questions", "rows": {id: Row}, "out"}
OUT_DIRS = "review_out_dirs"  # (pipeline, source) -> the session's row-file folder for it
GRID = "review_grid"


def _out_dir(key: tuple) -> Path:
    dirs = st.session_state.setdefault(OUT_DIRS, {})
    if key not in dirs:
        dirs[key] = tempfile.mkdtemp(prefix="longdoc-review-")
    return Path(dirs[key])


def _uploads_folder(files: list[tuple[str, bytes]]) -> Path:
    """The uploaded files in a fresh folder of this session (names reduced to their last part)."""
    folder = Path(tempfile.mkdtemp(prefix="longdoc-review-in-"))
    for name, data in files:
        (folder / Path(name).name).write_bytes(data)
    return folder


def build(pipeline: str, folder: Path | None, uploads: list[tuple[str, bytes]], questions_text: str) -> None:
    """Discover the inputs and answer them one by one, redrawing the table after each."""
    from pipelines.registry import get_pipeline

    try:
        questions = review.parse_questions([], questions_text)
    except ValueError as exc:
        st.error(md_line(str(exc)))
        return
    if folder is None:
        if not uploads:
            st.info("Upload files or name a folder first.")
            return
        folder, key = _uploads_folder(uploads), (pipeline, "uploads", tuple(sorted(n for n, _ in uploads)))
    else:
        folder = Path(folder).expanduser()
        if not folder.is_dir():
            st.error(md_line(f"{folder}: not a folder"))
            return
        key = (pipeline, str(folder.resolve()))
    inputs = get_pipeline(pipeline).discover(folder)
    from app.batch import ignored_files

    # files no input reads (an unpaired contract version, an unsupported type), said before the table
    left_out = ignored_files(folder, inputs, pipeline)
    if left_out:
        st.warning(f"{len(left_out)} file(s) not in the table:\n"
                   + "\n".join(f"- {md_line(f['file'])}: {md_line(f['reason'])}" for f in left_out))
    if not inputs:
        st.warning(md_line(f"No inputs for the {pipeline} pipeline in {folder}."))
        return
    out = _out_dir(key)
    state = {"pipeline": pipeline, "inputs": {i.input_id: i for i in inputs}, "questions": questions, "rows": {},
             "out": str(out)}
    st.session_state[STATE] = state
    overall = st.progress(0.0, text=f"0 of {len(inputs)} inputs")
    current = st.empty()
    table = st.empty()

    # inputs in groups whose questions go to the engine together (`longdoc batch --group`'s default
    # for the device: 8 on a GPU, 1 on the CPU, where the bar then moves per input)
    size = review.default_group(asking.engine_settings())
    done = 0
    for lo in range(0, len(inputs), size):
        group = inputs[lo:lo + size]
        name = group[0].input_id if len(group) == 1 else f"inputs {lo + 1}-{lo + len(group)}"
        bar = current.progress(0.0, text=f"{name}: starting")

        def progress(step: str, p, bar=bar, name=name) -> None:
            if p is None:
                bar.progress(0.0, text=f"{name}: loading the model…")
            elif p is not False:
                bar.progress(p.fraction, text=f"{name}: {asking.progress_line(step, p)}")

        run = asking.make_run("off", on_progress=progress)
        if run is None:
            return
        results = review.review_inputs(pipeline, [(inp, review.row_path(out, pipeline, inp.input_id)) for inp in group],
                                       questions, run)
        for inp, res in zip(group, results, strict=True):
            state["rows"][inp.input_id] = res.row
            done += 1
            how = f"{res.computed} computed, {res.reused} reused" if res.row.error is None else "could not be read"
            overall.progress(done / len(inputs), text=f"{done} of {len(inputs)} inputs · {inp.input_id}: {how}")
        with table.container():
            _grid(state)
    current.empty()
    table.empty()


def _table(state) -> review.ReviewTable:
    rows = [state["rows"][i] for i in state["inputs"] if i in state["rows"]]
    paths = [p for i in state["inputs"].values() for p in i.paths]
    return review.build_table(rows, state["questions"], asking.engine_settings().describe(), paths)


def _grid(state, key: str | None = None):
    """The table as a dataframe; with `key`, a row can be clicked (the cell view below follows it)."""
    grid = review.grid_rows(_table(state))
    head, body = grid[0], grid[1:]
    data = [dict(zip(head, line, strict=True)) for line in body]
    if key is None:
        return st.dataframe(data, hide_index=True)
    return st.dataframe(data, hide_index=True, key=key, on_select="rerun", selection_mode="single-row")


def _docs(state, input_id: str) -> dict:
    """The input's documents by doc_id (loaded once per session)."""
    cache = st.session_state.setdefault("review_docs", {})
    if input_id not in cache:
        from pipelines.registry import get_pipeline

        inp = state["inputs"][input_id]
        cache[input_id] = {d.doc_id: d for d in get_pipeline(state["pipeline"]).load(inp)}
    return cache[input_id]


def show_cell(state, input_id: str, question: review.Question) -> None:
    row = state["rows"].get(input_id)
    if row is None:
        return
    if row.error:
        st.error(md_line(row.error))
        return
    cell = row.cell(question.text)
    if cell is None:
        st.info("Not answered yet.")
        return
    st.markdown(f"**{md_text(question.name)}** · {md_text(question.text)}")
    conf = "" if cell.confidence is None else f" (confidence {cell.confidence:.0%})"
    if cell.error:
        st.error(md_line(cell.error))
    elif cell.status == "not_stated":
        st.warning(md_line(f"Not stated in the document{conf}."))
    elif low_confidence(cell):
        st.warning(md_text(f"Low confidence ({cell.confidence:.0%}): check the quoted passage below. Possible answer: "
                           + " ".join(cell.answer.split())))
    else:
        st.info(md_text(" ".join(cell.answer.split())))
    facts = ["quoted from the document" + conf if cell.status == "answered" else "the nearest passages below",
             f"prompt {cell.prompt_tokens:,} tokens", f"{cell.seconds:.1f} s"]
    if cell.model_supported and cell.model_text and cell.model_text.strip() != cell.answer.strip():
        facts.append("in the model's words (carried by the quote): " + cell.model_text)
    if cell.cached_prompt_tokens:
        facts.append(f"{cell.cached_prompt_tokens:,} prompt tokens from the cache")
    st.caption(md_text(" · ".join(facts)))
    if cell.fallback:
        st.warning(md_line(cell.fallback))
    docs = _docs(state, input_id)
    names = {d.doc_id: d.source_name for d in row.documents}
    passages = cell.spans if cell.status != "not_stated" else cell.near_misses
    value = cell.value if cell.status == "answered" else None
    rank = {id(s): k for k, s in enumerate(passages, 1)}
    for doc_id in dict.fromkeys(s.doc_id for s in passages):
        doc = docs.get(doc_id)
        if doc is None:
            continue
        spans = [s for s in passages if s.doc_id == doc_id]
        what = "the answer is quoted from" if cell.status == "answered" else "nearest passages in"
        st.caption(md_text(f"{what} {names.get(doc_id, doc_id)}"))
        v = (value.char_start, value.char_end) if value is not None and value.doc_id == doc_id else None
        for a, b, inside in asking.excerpts(doc.text, spans):
            marks = [(s.char_start, s.char_end, rank[id(s)], s.score) for s in inside]
            st.html(asking.excerpt_html(doc.text, a, b, marks, v))


def page() -> None:
    from pipelines.registry import available

    st.title("Review table")
    st.caption("The same questions asked of every document of a folder: one row per document (a contract pair, a "
               "patient, a report, a patent), one column per question, each answer quoted from the document with a "
               "calibrated confidence, or \"not stated\". Sort by confidence and check the weakest first.")
    pending = st.session_state.pop(PENDING, None)
    names = available()
    pipeline = st.selectbox("Pipeline (what one row is)", names, key="review_pipeline",
                            index=names.index("contracts") if "contracts" in names else 0)
    source = st.radio("Documents", ("Upload files", "A folder on this machine"), horizontal=True, key="review_source")
    folder, uploads = None, []
    if source == "Upload files":
        files = st.file_uploader("Files (contract versions as X.v1.txt / X.v2.txt)", accept_multiple_files=True,
                                 key="review_uploads")
        uploads = [(f.name, f.getvalue()) for f in files or []]
    else:
        folder = st.text_input("Folder", key="review_folder", placeholder="/path/to/folder") or None
    questions = st.text_area("Questions, one per line (optionally `name: question`)", key="review_questions",
                             placeholder="law: Which law governs the agreement?\nterm: How long is the term?")
    if st.button("Build the table", type="primary", key="review_go"):
        pending = (pipeline, folder, uploads, questions)
    if pending is not None:
        build(*pending)
    state = st.session_state.get(STATE)
    if not state or not state["rows"]:
        return
    st.subheader("Answers")
    event = _grid(state, key=GRID)
    ids = [i for i in state["inputs"] if i in state["rows"]]
    picked = getattr(getattr(event, "selection", None), "rows", None) or []
    c1, c2 = st.columns(2)
    input_id = c1.selectbox("Row", ids, index=picked[0] if picked and picked[0] < len(ids) else 0, key="review_row")
    qnames = [q.name for q in state["questions"]]
    qname = c2.selectbox("Question", qnames, key="review_question")
    show_cell(state, input_id, state["questions"][qnames.index(qname)])
    table = _table(state)
    d1, d2, d3, d4 = st.columns(4)
    d1.download_button("Table (CSV)", review.to_csv(review.grid_rows(table)), file_name="review.csv",
                       mime="text/csv", key="review_dl_csv")
    d2.download_button("Sources (CSV)", review.to_csv(review.source_rows(table)), file_name="review-sources.csv",
                       mime="text/csv", key="review_dl_sources")
    d3.download_button("JSON", table.model_dump_json(indent=2) + "\n", file_name="review.json",
                       mime="application/json", key="review_dl_json")
    d4.download_button("Excel", review.to_xlsx(table), file_name="review.xlsx", key="review_dl_xlsx",
                       mime="application/vnd.openxmlformats-officedocument.spreadsheetml.sheet")
