"""Terminal rendering of a `ReportResult` with rich: targets, mentions and what is unresolved."""

from __future__ import annotations

from rich.console import Group
from rich.table import Table
from rich.text import Text

from pipelines.reports import ReportResult


def target_names(result: ReportResult, ids: list[str]) -> list[str]:
    """Targets as a reader names them: the label as printed and its id ('图2.1 (figure-2-1)')."""
    labels = {t.id: t.label for t in result.targets}
    return [f"{labels[i]} ({i})" if labels.get(i) and labels[i] != i else i for i in ids]


def render_terminal(result: ReportResult, max_rows: int = 200) -> Group:
    """A rich renderable: a summary line, the figure/table targets, the mentions, the unresolved."""
    doc = result.document
    s = result.stats
    head = Text.assemble(
        (doc.source_name, "bold"),
        f" — {doc.n_pages} pages; {s.get('figures_tables', 0)} figures/tables, {s.get('targets', 0)} targets; "
        f"{s.get('mentions', 0)} mentions: {s.get('resolved', 0)} resolved, {s.get('external', 0)} external, "
        f"{s.get('unresolved', 0)} unresolved",
    )
    parts: list = [head]
    for w in result.warnings:
        parts.append(Text(f"warning: {w}", style="yellow"))

    tt = Table(title="Figures and tables", show_lines=False, expand=False)
    for col in ("label", "id", "page", "caption"):
        tt.add_column(col, overflow="fold")
    for t in result.targets:
        if t.kind in ("figure", "table", "exhibit", "chart"):
            tt.add_row(t.label, t.id, str(t.page), (t.caption[:100] + ("…" if len(t.caption) > 100 else "")))
    parts.append(tt)

    mt = Table(title="Mentions", expand=False)
    for col in ("page", "text", "kind", "→ targets", "conf", "reason"):
        mt.add_column(col, overflow="fold")
    for m in result.mentions[:max_rows]:
        style = {"external": "cyan", "unresolved": "red", "ambiguous": "yellow"}.get(m.resolution, "")
        tgt = ", ".join(target_names(result, m.targets)) if m.targets else m.resolution
        mt.add_row(str(m.page), m.text.replace("\n", " "), m.kind, tgt, f"{m.confidence:.2f}", m.reason[:160], style=style)
    if len(result.mentions) > max_rows:
        mt.caption = f"… {len(result.mentions) - max_rows} more (use --json for all)"
    parts.append(mt)
    if result.unresolved:
        ut = Table(title="Unresolved", expand=False)
        for col in ("page", "text", "why", "reason"):
            ut.add_column(col, overflow="fold")
        for u in result.unresolved:
            ut.add_row(str(u.page), u.text.replace("\n", " "), u.why, u.reason)
        parts.append(ut)
    if result.unreferenced_targets:
        floats = [t for t in result.unreferenced_targets if t.split("-")[0] in ("figure", "table", "exhibit", "chart")]
        parts.append(Text(f"Figures/tables nothing mentions: {', '.join(floats) or 'none'}"
                          f" ({len(result.unreferenced_targets)} unreferenced targets in all)"))
    return Group(*parts)
