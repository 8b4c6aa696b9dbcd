"""The medical evidence page: one patient's documents -> problem and medication lists, timeline
chart (sources on hover), documents with entities highlighted, conflicts, and a question box whose
evidence is highlighted in the documents; JSON download. Documents of several patients are
analysed one patient at a time, chosen in a box. The LLM steps (off / auto / on: attention-attributed
evidence, a short answer to the question) run through a pipelines.llm.LLMRun with their progress and
report, and "Ask about these documents" answers over the patient's documents (app/ui/asking.py).

Tests call `run_input(files, question)` directly, or put `(files, question)` in
`st.session_state[PENDING]` before an AppTest run; people use the uploader or a bundled sample.
"""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from app.export import to_json
from app.ui import asking
from app.ui.common import SAMPLES, UPLOAD_TYPES, highlight, load_all, md_text, show_ingest_error

PENDING = "medical_pending_input"
RESULT = "medical_result"
TEXTS = "medical_texts"
FILES = "medical_files"
DOCS = "medical_documents"  # the analysed patient's Documents, for questions
EMBEDDINGS = "medical_use_embeddings"  # False: lexical + concept evidence ranking only (tests, slow machines)
COLOURS = {"problem": "#fecaca", "symptom": "#fde68a", "medication": "#bbf7d0", "procedure": "#bfdbfe",
           "lab": "#e9d5ff", "vital": "#fbcfe8", "immunization": "#ccfbf1"}
NEGATED = "#e5e7eb"
EVIDENCE = "#fef08a"
PATIENTS = "medical_patients"  # one line per patient when the documents are of several
QUESTION = "medical_last_question"


@st.cache_resource
def _pipeline(use_embeddings: bool = True):
    from pipelines.medical import MedicalPipeline

    return MedicalPipeline(use_embeddings=use_embeddings)


def _use_embeddings() -> bool:
    try:
        return bool(st.session_state.get(EMBEDDINGS, True))
    except Exception:
        return True


def sample_patients() -> list[Path]:
    """Bundled sample patients: subfolders of data/samples/medical/."""
    folder = SAMPLES / "medical"
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith("."))


def patient_files(folder: Path) -> list[tuple[str, bytes]]:
    from pipelines.medical import MedicalPipeline

    inputs = MedicalPipeline(use_embeddings=False).discover(folder)
    return [(p.name, p.read_bytes()) for inp in inputs for p in inp.paths]


def run_input(files: list[tuple[str, bytes]], question: str | None = None, patient: int = 0, llm=None):
    """Ingest (pipelines.documents.load_bytes) and analyse the files (llm: a pipelines.llm.LLMRun for
    the LLM steps; None: rules only). When their identity evidence shows several patients, only
    patient number `patient` (0-based, in the order of their first file) is analysed and the
    patients' one-line descriptions are kept in the session (PATIENTS).
    Raises IngestError (one line naming the file) for a bad file, IngestErrors (one line each) for
    several. Returns the MedicalResult; the documents and their texts are kept in the session for
    highlighting and questions."""
    docs = load_all(files)
    pipe = _pipeline(_use_embeddings())
    groups = pipe.patients(docs)
    described = [f"Patient {k + 1}: {', '.join(docs[i].doc_id for i in g.members[:3])}"
                 f"{' …' if len(g.members) > 3 else ''} — {g.describe()}" for k, g in enumerate(groups)]
    if len(groups) > 1:
        docs = [docs[i] for i in groups[min(max(patient, 0), len(groups) - 1)].members]
    result = pipe.run_documents(docs, questions=[question] if question else None, llm=llm)
    try:
        asking.keep(TEXTS, {d.doc_id: d.text for d in docs})
        asking.keep(DOCS, docs)
        asking.keep(PATIENTS, described if len(groups) > 1 else [])
    except Exception:  # outside a Streamlit run (plain function call in a test)
        pass
    return result


def analyse(files: list[tuple[str, bytes]], question: str | None, mode: str, patient: int = 0):
    """run_input with an LLMRun of `mode`, its progress drawn; the result goes in the session."""
    asking.clear_answers("medical")
    with asking.RunProgress("Analysing the record…", stop_key=None if mode == "off" else "medical_stop") as prog:
        run = asking.make_run(mode, prog, prog.cancel)
        asking.keep(RESULT, run_input(files, question, patient=patient, llm=run))


def _timeline_chart(result):
    import altair as alt
    import pandas as pd

    rows = []
    for ev in result.events:
        if not ev.time.start or ev.type == "vital" and ev.concept.startswith("vital:"):
            continue
        start = ev.time.start
        end = ev.time.end or start
        if ev.time.granularity in ("minute", "hour"):  # draw at least a day, or the bar is invisible
            from datetime import date, timedelta

            end = (date.fromisoformat(start[:10]) + timedelta(days=1)).isoformat()
        if len(start) == 4:
            start, end = f"{start}-01-01", f"{end}-01-01"
        elif len(start) == 7:
            start, end = f"{start}-01", f"{end}-01"
        rows.append({
            "start": start, "end": end, "event": ev.concept, "type": ev.type, "status": ev.status,
            "anchored_to": ev.time.anchored_to, "granularity": ev.time.granularity or "",
            "sources": " | ".join(f"{s.doc_id}: {s.text[:60]}" for s in ev.sources[:4]),
        })
    if not rows:
        return None
    df = pd.DataFrame(rows)
    return (
        alt.Chart(df)
        .mark_bar(size=10, cornerRadius=3)
        .encode(
            x=alt.X("start:T", title="date"),
            x2="end:T",
            y=alt.Y("event:N", sort=None, title=None, axis=alt.Axis(labelOverlap=False, labelLimit=220)),
            color=alt.Color("status:N"),
            tooltip=["event", "type", "status", "start", "end", "granularity", "anchored_to", "sources"],
        )
        .properties(height=max(200, 22 * df["event"].nunique()))
    )


def render(result, texts: dict[str, str] | None = None) -> None:
    """Draw a MedicalResult: metrics, the problem and medication lists and abnormal labs, timeline,
    conflicts, evidence and highlighted documents."""
    texts = texts if texts is not None else st.session_state.get(TEXTS, {})
    p = result.patient
    c1, c2, c3, c4 = st.columns(4)
    c1.metric("Documents", len(result.documents))
    c2.metric("Entities", len(result.entities))
    c3.metric("Events", len(result.events))
    c4.metric("Conflicts", len(result.conflicts))
    anchors = ", ".join(f"{k}: {a.date}" for k, a in p.anchors.items()) or "none found"
    st.caption(f"Patient {p.id} · sex {p.sex or '?'} · age {p.age or '?'} · anchors — {anchors}")
    st.download_button("Download JSON", to_json(result), file_name=f"medical-{p.id}.json", mime="application/json",
                       key="medical_download")
    for w in result.warnings:
        st.warning(w)

    left, right = st.columns(2)
    with left:
        st.subheader("Problem list")
        if result.problems:
            st.dataframe([{"problem": pr.text, "status": pr.status, "first": pr.first, "last": pr.last}
                          for pr in result.problems], hide_index=True, key="medical_problems")
        else:
            st.caption("No problems found.")
    with right:
        st.subheader("Medications")
        if result.medications:
            st.dataframe([{"drug": md.drug, "dose": md.dose, "route": md.route, "frequency": md.frequency,
                           "start": md.start, "stop": md.stop or ("stopped" if md.stopped else None), "status": md.status}
                          for md in result.medications], hide_index=True, key="medical_medications")
        else:
            st.caption("No medications found.")
    abnormal = [e for e in result.entities if e.type == "lab" and e.normalized.get("flag") in ("high", "low")]
    if abnormal:
        st.markdown("**Abnormal labs:** " + " · ".join(
            md_text(f"{e.normalized.get('analyte')} {e.normalized.get('value')} {e.normalized.get('unit') or ''}")
            + f" {'↑' if e.normalized.get('flag') == 'high' else '↓'}" for e in abnormal[:30]))

    st.subheader("Timeline")
    chart = _timeline_chart(result)
    if chart is not None:
        st.altair_chart(chart, use_container_width=True)
    else:
        st.caption("No event could be placed on a date (no document dates or anchors found).")

    st.subheader("Conflicts")
    if not result.conflicts:
        st.caption("No conflicts found.")
    for c in result.conflicts:
        st.error(md_text(f"{c.date}: {c.description}"))

    if result.answers:  # LLM step medical.answer: each sentence with the record sentences it rests on
        from app.render.medical import answer_lines

        st.subheader("Answers (local model)")
        st.text("\n".join(answer_lines(result)))  # model and document text: shown as text

    st.subheader("Evidence")
    ev_marks: dict[str, list[tuple[int, int, str, str]]] = {}
    for ev in result.evidence:
        label = ("Diagnosis: " if ev.kind == "diagnosis" else "Question: ") + ev.claim
        with st.expander(label, expanded=ev.kind == "question"):
            st.caption(ev.method)
            for it in ev.supporting:
                st.markdown(f"**+ {it.score:.3f}** · {md_text(it.doc_id)} · {md_text(it.section or '—')} — "
                            f"{md_text(it.span.text)}")
                if ev.kind == "question":
                    ev_marks.setdefault(it.doc_id, []).append((it.span.char_start, it.span.char_end, EVIDENCE, f"evidence {it.score:.3f}"))
            for it in ev.contradicting:
                st.markdown(f"**− {it.score:.3f}** (contradicting) · {md_text(it.doc_id)} · {md_text(it.section or '—')} — "
                            f"{md_text(it.span.text)}")
                if ev.kind == "question":
                    ev_marks.setdefault(it.doc_id, []).append((it.span.char_start, it.span.char_end, NEGATED, "contradicting"))

    st.subheader("Documents")
    st.markdown(" ".join(f'<mark style="background:{c}">{k}</mark>' for k, c in COLOURS.items())
                + f' <mark style="background:{NEGATED}">negated</mark> <mark style="background:{EVIDENCE}">evidence</mark>',
                unsafe_allow_html=True)
    ids = [d.info.doc_id for d in result.documents]
    if ids:
        chosen = st.selectbox("Document", ids, key="medical_doc",
                              format_func=lambda i: next(f"{d.info.doc_id} · {d.kind} · {d.date or 'no date'}" for d in result.documents if d.info.doc_id == i))
        text = texts.get(chosen)
        marks = list(ev_marks.get(chosen, []))
        for e in result.entities:
            if e.doc_id != chosen:
                continue
            colour = NEGATED if e.assertion == "negated" else COLOURS.get(e.type, "#eeeeee")
            marks.append((e.span.char_start, e.span.char_end, colour, f"{e.type} · {e.assertion} · {e.concept}"))
        if text is not None:
            st.html(highlight(text, 0, marks))
        else:
            st.caption("Document text not available in this session.")


def page() -> None:
    st.title("Medical evidence tracing")
    st.caption("One patient's documents → entities with assertions, one timeline, conflicts, and ranked evidence for a question.")
    pending = st.session_state.pop(PENDING, None)
    ups = st.file_uploader("The patient's documents", type=UPLOAD_TYPES, accept_multiple_files=True, key="medical_upload")
    samples = sample_patients()
    pick = st.selectbox("…or a bundled sample patient", [None, *samples], format_func=lambda p: "—" if p is None else p.name,
                        key="medical_sample")
    question = st.text_input("Question or conclusion to find evidence for (optional)", key="medical_question",
                             placeholder="e.g. why was the antibiotic changed?")
    mode = asking.mode_choice("medical")
    if st.button("Run", type="primary", key="medical_run"):
        if ups:
            pending = ([(u.name, u.getvalue()) for u in ups], question)
        elif pick is not None:
            pending = (patient_files(pick), question)
        else:
            st.info("Upload documents or choose a sample patient first.")
    if pending is not None:
        files, q = pending
        from pipelines.documents import IngestError

        for key in (RESULT, DOCS, TEXTS, PATIENTS):
            st.session_state.pop(key, None)
        st.session_state["medical_patient_shown"] = 0
        try:
            load_all(files)  # a bad file: one line each, before any work
        except IngestError as exc:
            show_ingest_error(exc)
        else:
            st.session_state[FILES] = files
            st.session_state[QUESTION] = q
            analyse(files, q, mode)
    patients = st.session_state.get(PATIENTS) or []
    if len(patients) > 1 and st.session_state.get(FILES):
        st.warning(f"These documents are of {len(patients)} patients, not one (by name, record number, sex, age or "
                   "stay): each is analysed on its own.")
        chosen = st.selectbox("Patient", range(len(patients)), format_func=lambda k: patients[k], key="medical_patient")
        if chosen != st.session_state.get("medical_patient_shown", 0):
            st.session_state["medical_patient_shown"] = chosen
            analyse(st.session_state[FILES], st.session_state.get(QUESTION), mode, patient=chosen)
    result = st.session_state.get(RESULT)
    if result is not None:
        asking.show_llm_report(result.llm)
        docs = st.session_state.get(DOCS)
        if docs:
            from pipelines.medical import MedicalPipeline

            asking.ask_box("medical", docs, mode,
                           structure=MedicalPipeline().structure_answerer(result, list(docs)))
        render(result)
