"""Terminal rendering of a `ReportResult` with rich: targets, mentions and what is unresolved; with
LLM steps, the scope decisions and the deep summary (also as Markdown and rows for the web page)."""

from __future__ import annotations

import re

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
    parts.extend(render_llm_terminal(result))
    return Group(*parts)


def scope_rows(result: ReportResult) -> list[dict]:
    """One row per reports.scope decision (the web page's table)."""
    return [{"page": d.span.page, "mention": d.text.replace("\n", " "), "case": d.case, "rules": d.rule_resolution,
             "prior p(external)": d.rule_p_external, "model margin": d.model_margin, "p(external)": d.p_external,
             "decision": d.decision, "changed": d.changed, "sentence": d.context.text.replace("\n", " ")[:200]}
            for d in result.scope or []]


_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]<>()#+!|~$-])")


def _md(s: str) -> str:
    """Document or model text made inert for Markdown (no HTML, links, emphasis or headings)."""
    return _MD_SPECIAL.sub(r"\\\1", s.replace("\n", " "))


def _spans_note(spans) -> str:
    return "; ".join(f"p{sp.page} [{sp.char_start}:{sp.char_end}]" for sp in spans)


def deep_summary_markdown(result: ReportResult) -> str:
    """The deep summary as Markdown: per section, its key sentences quoted (each with its page and
    characters) and the callouts inlined after them (the target's description at its first
    callout), then the whole report's."""
    ds = result.deep_summary
    if ds is None:
        return ""
    out = [f"*Key sentences quoted from the report ({_md(ds.strategy)}: chosen by centrality and the model's "
           f"attention, no generated text); {ds.document_tokens:,} document tokens.*"]
    for sec in ds.sections:
        pages = f"p. {sec.pages[0]}" if len(sec.pages) == 1 else f"pp. {sec.pages[0]}–{sec.pages[-1]}"
        out.append(f"\n**{_md(sec.title)}** ({pages})\n")
        if sec.error:
            out.append(f"> no summary: {_md(sec.error)}")
        for i, s in enumerate(sec.sentences):
            line = f"- “{_md(s.text)}” *\\[{_spans_note(s.spans)}\\]*"
            for c in sec.callouts:
                if c.sentence == i:
                    line += "\n  - " + _md(_callout_text(c))
            out.append(line)
        if not sec.sentences:
            out.extend("- " + _md(_callout_text(c)) for c in sec.callouts)
        if sec.fallback:
            out.append(f"> {_md(sec.fallback)}")
    out.append("\n**Whole report**\n")
    out.extend(f"- “{_md(s.text)}” *\\[{_spans_note(s.spans)}\\]*" for s in ds.whole)
    if ds.whole_error:
        out.append(f"> no whole summary: {_md(ds.whole_error)}")
    if ds.dropped:
        out.append("\n*Left out:* " + " · ".join(_md(d) for d in ds.dropped))
    return "\n".join(out)


def _callout_text(c) -> str:
    where = c.mention.text.replace("\n", " ")
    if c.target is None:
        return f"“{where}” → {c.resolution}"
    via = f" (via {' → '.join(c.via)})" if c.via else ""
    if c.first:
        return f"“{where}” → {c.description}{via}"
    return f"“{where}” → {c.label} (p. {c.page}, described above){via}"


def render_llm_terminal(result: ReportResult) -> list:
    """The LLM steps' output: which ran, the scope decisions, the deep summary; [] when none ran."""
    if result.llm is None:
        return []
    parts: list = []
    ran = ", ".join(f"{s.step} ({s.seconds:.1f} s, {s.requests} requests)" if s.ran else f"{s.step}: not run ({s.reason})"
                    for s in result.llm.steps)
    parts.append(Text(f"LLM ({result.llm.mode}, {result.llm.model}): {ran or 'no step'}", style="dim"))
    if result.llm.message:
        parts.append(Text(result.llm.message, style="yellow"))
    if result.scope:
        st = Table(title="Internal or external (reports.scope)", expand=False)
        for col in ("page", "mention", "case", "rules", "p(ext) rules → fused", "decision"):
            st.add_column(col, overflow="fold")
        for d in result.scope:
            st.add_row(str(d.span.page), d.text.replace("\n", " "), d.case, d.rule_resolution,
                       f"{d.rule_p_external:.2f} → {d.p_external:.2f}", d.decision + (" (changed)" if d.changed else ""),
                       style="bold" if d.changed else "")
        parts.append(st)
    ds = result.deep_summary
    if ds is not None:
        how = "" if ds.strategy == "key sentences" else f" ({ds.strategy})"  # say so only when the model was not read
        parts.append(Text(f"Deep summary: key sentences quoted from the report{how}", style="bold"))
        for sec in ds.sections:
            parts.append(Text(f"{sec.title} (p. {', '.join(map(str, sec.pages))})", style="underline"))
            if sec.error:
                parts.append(Text(f"  no summary: {sec.error}", style="red"))
            for i, s in enumerate(sec.sentences):
                parts.append(Text.assemble("  “", " ".join(s.text.split()), "”", (f"  [{_spans_note(s.spans)}]", "dim")))
                for c in sec.callouts:
                    if c.sentence == i:
                        parts.append(Text("    → " + _callout_text(c), style="cyan"))
            if not sec.sentences:
                parts.extend(Text("    → " + _callout_text(c), style="cyan") for c in sec.callouts)
            if sec.fallback:
                parts.append(Text(f"  {sec.fallback}", style="yellow"))
        if ds.whole or ds.whole_error:
            parts.append(Text("Whole report", style="underline"))
            parts.extend(Text.assemble("  “", " ".join(s.text.split()), "”", (f"  [{_spans_note(s.spans)}]", "dim"))
                         for s in ds.whole)
            if ds.whole_error:
                parts.append(Text(f"  no whole summary: {ds.whole_error}", style="red"))
        for d in ds.dropped:
            parts.append(Text(f"left out: {d}", style="yellow"))
    return parts
