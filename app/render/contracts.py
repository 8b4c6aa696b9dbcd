"""Drawings of a `ContractResult`: the terminal report (rich) and a self-contained HTML redline.

Both put the material changes first, then every aligned pair with its inline redline
(deletions struck through in red, insertions underlined in green, renumbering in amber; in plain
text, where there are no styles, `[-deleted-]{+inserted+}`). Clauses are named as a reader names
them (number and heading, a heading's text), not by their export ids.
The HTML has no external resources (inline CSS, no scripts needed) and links each summary entry
to its row. When the LLM steps ran (`result.llm`), both also show the amendment paragraph (each
sentence linked to the changes it rests on), each change's explanation with the old and new words
it rests on, the model's materiality judgement where the fusion changed the rules' decision, and
one line per step (what ran, with which model, what it cost).
"""

from __future__ import annotations

import html
from typing import TYPE_CHECKING

from pipelines.contracts import AlignmentRow, ContractResult
from pipelines.documents import Document

if TYPE_CHECKING:
    from rich.console import Group

CHANGE_COLOURS = {
    "unchanged": "#9ca3af", "modified": "#2563eb", "added": "#16a34a", "deleted": "#dc2626", "moved": "#9333ea",
    "renumbered": "#d97706", "split": "#0891b2", "merged": "#0891b2",
}

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;margin:24px;color:#111827}
h1{font-size:20px} h2{font-size:16px;margin-top:28px}
.meta{color:#4b5563;font-size:13px}
table.rl{border-collapse:collapse;width:100%;table-layout:fixed}
table.rl td{vertical-align:top;border-top:1px solid #e5e7eb;padding:6px 8px;font-size:13px;white-space:pre-wrap;word-wrap:break-word}
table.rl td.tag{width:120px;white-space:normal}
.badge{display:inline-block;padding:1px 6px;border-radius:8px;color:#fff;font-size:11px}
del{background:#fee2e2;color:#991b1b;text-decoration:line-through}
ins{background:#dcfce7;color:#166534;text-decoration:underline}
.ren{background:#fef3c7;color:#92400e}
.fmt{background:#f3f4f6}
.anchor{font-family:ui-monospace,monospace;font-size:11px;color:#374151}
.flags{font-size:12px;color:#7c2d12;margin-top:4px;white-space:normal}
.material{font-weight:600}
tr.unchanged td{color:#6b7280}
li{margin:3px 0;font-size:13px}
.expl{font-weight:400;color:#1f2937;font-size:12px;margin-left:16px}
.expl .rules{color:#6b7280}
.llm{color:#4b5563;font-size:12px}
.amend{background:#f9fafb;border-left:3px solid #2563eb;padding:6px 10px;font-size:13px}
"""


def side_html(row: AlignmentRow, side: str) -> str:
    """One side ("a" or "b") of a row's redline as HTML: the clause text with its changes marked."""
    out = []
    for op in row.diff:
        span = op.a_span if side == "a" else op.b_span
        if span is None:
            continue
        t = html.escape(span.text)
        if op.op == "equal":
            out.append(t)
        elif op.op == "format":
            out.append(f'<span class="fmt">{t}</span>')
        elif op.op == "renumber":
            out.append(f'<span class="ren">{t}</span>')
        elif side == "a":
            out.append(f"<del>{t}</del>")
        else:
            out.append(f"<ins>{t}</ins>")
    return "".join(out)


def badge(change: str) -> str:
    return f'<span class="badge" style="background:{CHANGE_COLOURS.get(change, "#6b7280")}">{html.escape(change)}</span>'


def flags_html(row: AlignmentRow) -> str:
    if not row.flags:
        return ""
    items = []
    for f in row.flags:
        cls = "material" if f.material else ""
        items.append(f'<span class="{cls}">⚑ {html.escape(f.kind)}: {html.escape(f.detail)}</span>')
    return '<div class="flags">' + "<br>".join(items) + "</div>"


def row_html(k: int, row: AlignmentRow, where: str | None = None) -> str:
    """One table row of the side-by-side redline; `where` names its clauses (`ContractResult.where`)."""
    extra = []
    if row.edited and row.change not in {"modified"}:
        extra.append("edited")
    if row.renumbered and row.change != "renumbered":
        extra.append("renumbered")
    tag = badge(row.change) + (f' <span class="meta">{", ".join(extra)}</span>' if extra else "")
    where = where if where is not None else f"{row.a or '—'} → {row.b or '—'}"
    anchors = f'<div class="anchor">{html.escape(where)} · {row.score:.2f}</div>'
    cls = "unchanged" if row.change == "unchanged" and not row.flags else ""
    return (f'<tr id="row-{k}" class="{cls}"><td class="tag">{tag}{anchors}</td>'
            f"<td>{side_html(row, 'a')}</td><td>{side_html(row, 'b')}{flags_html(row)}</td></tr>")


def _quote(text: str, limit: int = 60) -> str:
    t = " ".join(text.split())
    return f"“{t if len(t) <= limit else t[:limit - 1] + '…'}”"


def explanation_line(item) -> str | None:
    """A change's explanation as one line: the sentence, whether the model's own words were kept,
    and the old → new words it rests on; None when the step did not explain it."""
    e = item.explanation
    if e is None:
        return None
    old = ", ".join(_quote(s.text, 40) for s in e.a_spans[:2]) or "—"
    new = ", ".join(_quote(s.text, 40) for s in e.b_spans[:2]) or "—"
    who = "model" if e.kept else "rules (the model's sentence was not grounded)"
    return f"{e.text}  [{who}; rests on {old} → {new}]"


def materiality_note(item) -> str | None:
    """The model's materiality where it changed the rules' decision, else None."""
    m = item.materiality
    if m is None or not m.changed:
        return None
    return (f"model: {m.label} (log-odds {m.score:+.2f}); the rules said "
            f"{'material' if m.rule_material else 'not material'}")


def llm_lines(result: ContractResult) -> list[str]:
    """One line for the LLM run and one per step (ran or why not, seconds, requests, tokens)."""
    r = result.llm
    if r is None:
        return []
    out = [f"LLM steps ({r.mode}): {r.model}" + (f" — {r.message}" if r.message else "")]
    for st in r.steps:
        if st.ran:
            out.append(f"  {st.step}: {st.seconds:.1f} s, {st.requests} requests, {st.prompt_tokens:,} prompt tokens, "
                       f"{st.generated_tokens} generated" + (f"; {st.error}" if st.error else "")
                       + (f"; {st.reason}" if st.reason else ""))
        else:
            out.append(f"  {st.step}: not run ({st.reason})")
    return out


def redline_html(result: ContractResult, doc_a: Document | str | None = None, doc_b: Document | str | None = None) -> str:
    """A self-contained HTML redline of the pair: summary (material first, linked), then every row."""
    da, db = result.documents["a"].info, result.documents["b"].info
    name_a = doc_a.source_name if isinstance(doc_a, Document) else da.source_name
    name_b = doc_b.source_name if isinstance(doc_b, Document) else db.source_name
    s = result.stats
    parts = [
        "<!DOCTYPE html><html><head><meta charset=\"utf-8\">",
        f"<title>Redline: {html.escape(name_a)} → {html.escape(name_b)}</title><style>{CSS}</style></head><body>",
        f"<h1>Redline: {html.escape(name_a)} → {html.escape(name_b)}</h1>",
        f'<p class="meta">{s["clauses_a"]} → {s["clauses_b"]} clauses · {s["modified"]} modified · {s["added"]} added · '
        f'{s["deleted"]} deleted · {s["moved"]} moved · {s["renumbered"]} renumbered · {s["split"]} split · '
        f'{s["merged"]} merged · {s["material"]} material · method {html.escape(result.settings.method)}, '
        f"threshold {result.settings.threshold}</p>",
    ]
    for line in llm_lines(result):
        parts.append(f'<p class="llm">{html.escape(line)}</p>')
    if result.amendment is not None:
        parts.append('<h2>The amendment in one paragraph</h2><p class="amend">')
        for sent in result.amendment.sentences:
            links = " ".join(f'<a href="#row-{r}">[{html.escape(result.where(result.alignment[r]))}]</a>'
                             for r in sent.rows)
            parts.append(f"{html.escape(sent.text)} <sup>{links}</sup> ")
        if not result.amendment.kept:
            parts.append('<br><span class="meta">(written by the rules: the model\'s paragraph was not grounded in '
                         "the changes)</span>")
        parts.append("</p>")
    parts.append("<h2>Changes (material first)</h2><ul>")
    for item in result.summary:
        cls = ' class="material"' if item.material else ""
        mark = "⚑ " if item.material else ""
        extra = ""
        line = explanation_line(item)
        if line is not None:
            cls_e = "" if item.explanation.kept else ' class="rules"'
            extra += f'<div class="expl"><span{cls_e}>{html.escape(line)}</span></div>'
        note = materiality_note(item)
        if note is not None:
            extra += f'<div class="expl">{html.escape(note)}</div>'
        parts.append(f'<li{cls}><a href="#row-{item.row}">{mark}{html.escape(item.text)}</a>{extra}</li>')
    if not result.summary:
        parts.append("<li>No changes.</li>")
    parts.append('</ul><h2>Side by side</h2><table class="rl"><tr><th></th>'
                 f"<th>{html.escape(name_a)}</th><th>{html.escape(name_b)}</th></tr>")
    for k, row in enumerate(result.alignment):
        parts.append(row_html(k, row, result.where(row)))
    parts.append("</table></body></html>\n")
    return "".join(parts)


def render_terminal(result: ContractResult, show_unchanged: bool = False, max_chars: int = 600,
                    marks: bool = False) -> Group:
    """A rich renderable: counts, the material changes first, then each changed pair with its redline.
    With `marks` (output that is not a terminal: a file, a pipe) deletions and insertions are also
    written `[-old-]` and `{+new+}`, so they stay apart without colours."""
    from rich.console import Group
    from rich.markup import escape
    from rich.panel import Panel
    from rich.table import Table
    from rich.text import Text

    s = result.stats
    head = Text(
        f"{result.documents['a'].info.source_name} → {result.documents['b'].info.source_name}: "
        f"{s['clauses_a']} → {s['clauses_b']} clauses; {s['modified']} modified, {s['added']} added, "
        f"{s['deleted']} deleted, {s['moved']} moved, {s['renumbered']} renumbered, {s['split']} split, "
        f"{s['merged']} merged; {s['material']} material",
        style="bold",
    )
    summary = Table(title="Changes (material first)", show_lines=False, expand=True)
    summary.add_column("", width=2)
    summary.add_column("Change")
    for item in result.summary:
        cell = Text(item.text, style="bold" if item.material else "")
        line = explanation_line(item)
        if line is not None:
            cell.append(f"\n↳ {line}", style="italic" if item.explanation.kept else "dim")
        note = materiality_note(item)
        if note is not None:
            cell.append(f"\n↳ {note}", style="dim")
        summary.add_row("⚑" if item.material else "", cell)
    extra = [Text(line, style="dim") for line in llm_lines(result)]
    if result.amendment is not None:
        para = Text()
        for sent in result.amendment.sentences:
            para.append(sent.text + " ")
            para.append("[" + "; ".join(result.where(result.alignment[r]) for r in sent.rows) + "] ", style="dim")
        if not result.amendment.kept:
            para.append("\n(written by the rules: the model's paragraph was not grounded in the changes)", style="dim")
        extra.append(Panel(para, title="The amendment in one paragraph", title_align="left"))
    rows = []
    for row in result.alignment:
        if row.change == "unchanged" and not show_unchanged:
            continue
        t = Text()
        for op in row.diff:
            if op.op in {"equal", "format"}:
                t.append((op.b_span or op.a_span).text)
            else:
                renumber = op.op == "renumber"
                if op.a_span is not None:
                    old = f"[-{op.a_span.text}-]" if marks else op.a_span.text
                    t.append(old, style="strike yellow" if renumber else "strike red")
                if op.b_span is not None:
                    new = f"{{+{op.b_span.text}+}}" if marks else op.b_span.text
                    t.append(new, style="bold yellow" if renumber else "underline green")
            if len(t) > max_chars:
                t.truncate(max_chars)
                t.append(" …", style="dim")
                break
        for f in row.flags:
            t.append(f"\n⚑ {f.kind}: {f.detail}", style="bold magenta" if f.material else "magenta")
        title = escape(f"{result.where(row)}  [{row.change}{', edited' if row.edited and row.change != 'modified' else ''}]")
        rows.append(Panel(t, title=title, title_align="left", border_style=CHANGE_COLOURS.get(row.change, "white")))
    return Group(head, *extra, summary, *rows)


def terminal_text(result: ContractResult, width: int = 120, marks: bool = True) -> str:
    """The terminal report as plain text (tests, logs), changes marked `[-old-]{+new+}`."""
    import io

    from rich.console import Console

    console = Console(width=width, record=True, file=io.StringIO(), color_system=None)
    console.print(render_terminal(result, marks=marks))
    return console.export_text()
