"""Terminal view of a `MedicalResult` (rich): the patient, the problem and medication lists, the dated timeline (medications marked
started / stopped / continued, abnormal labs marked high / low), the conflicts between documents and
the top evidence for each conclusion. When the LLM steps ran (`result.llm`): each generated answer
with, under every sentence, the record sentences it rests on; per conclusion the sentences the
attention pass found most attended; what the steps read (the whole patient or the retrieval
fallback) and one line per step (`llm_lines`, `answer_lines`: plain text the web page shows too)."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from pipelines.medical import MedicalResult


def print_terminal(result: MedicalResult, console: Console | None = None) -> None:
    """Print the patient line, counts, the dated timeline, conflicts, the top evidence for each
    conclusion and the warnings."""
    con = console or Console()
    p = result.patient
    anchors = ", ".join(f"{k} {a.date}" for k, a in p.anchors.items()) or "none found"
    con.print(f"[bold]Patient[/bold] {p.id} · sex {p.sex or '?'} · age {p.age or '?'} · anchors: {anchors}")
    con.print(f"{len(result.documents)} documents, {len(result.entities)} entities, {len(result.events)} events, "
              f"{len(result.relations)} relations, {len(result.conflicts)} conflicts")
    if result.problems:
        pt = Table(title="Problem list")
        for col in ("problem", "status", "first", "last"):
            pt.add_column(col)
        for pr in result.problems:
            pt.add_row(escape(pr.text), pr.status, pr.first or "-", pr.last or "-")
        con.print(pt)
    if result.medications:
        mt = Table(title="Medications")
        for col in ("drug", "dose", "route", "frequency", "start", "stop", "new/continued"):
            mt.add_column(col)
        for md in result.medications:
            mt.add_row(escape(md.drug), md.dose or "-", md.route or "-", md.frequency or "-", md.start or "-",
                       md.stop or ("stopped" if md.stopped else "-"), md.status)
        con.print(mt)
    t = Table(title="Timeline (events with a date)", show_lines=False)
    for col in ("date", "event", "type", "status", "sources"):
        t.add_column(col)
    by_id = {e.id: e for e in result.entities}
    for ev in result.events:
        if not ev.time.start or ev.type in ("lab", "vital") and ev.status == "present" and ev.concept.startswith("vital:"):
            continue
        courses = sorted({str(by_id[m].normalized["course"]) for m in ev.mentions if "course" in by_id[m].normalized})
        name = ev.concept + (f" ({', '.join(courses)})" if courses else "")
        if ev.type == "lab":
            flags = {by_id[m].normalized.get("flag") for m in ev.mentions} & {"high", "low"}
            name += f" [{'/'.join(sorted(flags))}]" if flags else ""
        t.add_row(ev.time.start, escape(name), ev.type, ev.status, ", ".join(ev.documents))
    con.print(t)
    for c in result.conflicts:
        con.print(f"[red]conflict[/red] {c.date}: {escape(c.description)}")
    for ev in result.evidence:
        con.print(f"\n[bold]{'Diagnosis' if ev.kind == 'diagnosis' else 'Question'}:[/bold] {escape(ev.claim)}  [dim]({ev.method})[/dim]")
        for it in ev.supporting[:3]:
            con.print(f"  [green]+ {it.score:.3f}[/green] {escape(it.doc_id)} \\[{it.section or '-'}] {escape(it.span.text[:140])}")
        for it in ev.contradicting[:2]:
            con.print(f"  [red]- {it.score:.3f}[/red] {escape(it.doc_id)} \\[{it.section or '-'}] {escape(it.span.text[:140])}")
        if ev.attention:
            top = ev.attention[0]
            con.print(f"  [dim]most attended: {escape(top.doc_id)} {escape(_short(top.span.text))} "
                      f"({top.scores.get('attention_share', top.score):.0%} of the attention)[/dim]")
    for line in answer_lines(result):
        con.print(escape(line) if line.startswith("  ") else f"\n[bold]{escape(line)}[/bold]")
    for line in llm_lines(result):
        con.print(f"[dim]{escape(line)}[/dim]")
    for w in result.warnings:
        con.print(f"[yellow]warning[/yellow] {w}")


def _short(text: str, n: int = 120) -> str:
    t = " ".join(text.split())
    return t if len(t) <= n else t[: n - 1] + "…"


def answer_lines(result: MedicalResult) -> list[str]:
    """The generated answers (LLM step medical.answer): a line per question and answer, then under
    each answer sentence the record sentences it rests on (document, share of the attention, text)."""
    out: list[str] = []
    for a in result.answers or []:
        if a.error:
            out.append(f"Answer to: {a.question} — none ({a.error})")
            continue
        out.append(f"Answer to: {a.question}")
        for s in a.sentences:
            out.append(f"  {s.text}")
            for it in s.evidence:
                out.append(f"    ← {it.doc_id} ({it.score:.0%}): {_short(it.span.text)}")
    return out


def llm_lines(result: MedicalResult) -> list[str]:
    """One line for the LLM run (model, what the steps read) and one per step (ran or why not,
    seconds, requests, tokens, reuse)."""
    r = result.llm
    if r is None:
        return []
    out = [f"LLM steps ({r.mode}): {r.model}" + (f" — {r.message}" if r.message else "")]
    if result.llm_context is not None:
        out.append(f"  context: {result.llm_context.note}")
        if result.llm_context.answer_note:
            out.append(f"  answers: {result.llm_context.answer_note}")
    for st in r.steps:
        if st.ran:
            reuse = ", ".join(f"{k} {v}" for k, v in st.reuse.items() if v)
            out.append(f"  {st.step}: {st.seconds:.1f} s, {st.requests} requests, {st.prompt_tokens:,} prompt tokens, "
                       f"{st.generated_tokens} generated" + (f", reuse: {reuse}" if reuse else "")
                       + (f"; {st.error}" if st.error else "") + (f"; {st.reason}" if st.reason else ""))
        else:
            out.append(f"  {st.step}: not run ({st.reason})" + (f": {st.error}" if st.error else ""))
    return out
