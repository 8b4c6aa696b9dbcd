"""Drawings of a `PatentResult`'s claim tree: a rich tree for the terminal (`render_tree`, and
`render_tree_text` as plain text), Graphviz DOT for the UI (`to_dot`) and the claim-count line
(`counts_line`). Each claim is shown by what it adds (`TreeNode.label`: a dependent claim's
"wherein …" limitation, an independent claim's preamble), claim 1's tree first, an independent
claim's elements nested under it. When the LLM step `patents.claim_summaries` ran, each claim's
plain-language summary is shown under it (`render_tree`) and beside the chosen claim on the page
(`summaries_markdown`, `summary_rows`)."""

from __future__ import annotations

import io

from rich.console import Console
from rich.text import Text
from rich.tree import Tree

from pipelines.patents import Claim, ClaimPart, ClaimSummary, PatentResult, TreeNode, claim_label, shorten


def _label(c: Claim, codes: list[str], text: str | None = None, info: frozenset[str] = frozenset()) -> Text:
    """A claim's line: number, status, category, `text` (else its label), finding codes (`info`:
    the codes shown as notes rather than warnings)."""
    label = Text()
    label.append(f"{c.number}", style="bold")
    if c.status != "active":
        label.append(f" ({c.status})", style="yellow")
    label.append(f" [{c.category}] ", style="cyan")
    if not c.cancelled:
        label.append(text if text is not None else claim_label(c), style="")
    for code in codes:
        if code in info:
            label.append(f" ℹ {code}", style="dim")
        else:
            label.append(f" ⚠ {code}", style="bold red")
    return label


def counts_line(result: PatentResult) -> str:
    """'10 claims, 1 independent, 0 multiple dependent; for USPTO fees: 10 claims, 1 independent'
    (with the excess over 20 and 3, and the multiple dependent claim fee, when due)."""
    s = result.stats
    k = s.claim_counts
    line = f"{s.n_active} claims, {s.n_independent} independent, {s.n_multiple_dependent} multiple dependent"
    if k is None:
        return line
    line += f"; for USPTO fees: {k.total_for_fees} claims, {k.independent} independent"
    extra = []
    if k.excess_total:
        extra.append(f"{k.excess_total} over 20")
    if k.excess_independent:
        extra.append(f"{k.excess_independent} independent over 3")
    if k.multiple_dependent_fee:
        extra.append("multiple dependent claim fee")
    return line + (f" ({', '.join(extra)})" if extra else "")


def _add_parts(branch: Tree, c: Claim) -> None:
    """An independent claim's elements under its node, nested as the claim nests them."""
    if not c.parts:
        for e in c.elements:
            branch.add(Text("· " + shorten(e.text, 10), style="dim"))
        return
    stack: list[tuple[Tree, list[ClaimPart]]] = [(branch, c.parts)]
    while stack:
        node, items = stack.pop()
        for p in items:
            child = node.add(Text("· " + shorten(p.span.text, 10), style="dim"))
            if p.parts:
                stack.append((child, p.parts))


def _summary_line(s: ClaimSummary) -> Text:
    """A claim's plain-language summary as a dim line: '≈ Claim 3 adds that …' (a rules one marked)."""
    line = Text("≈ " + " ".join(s.text.split()), style="italic green" if s.source == "model" else "italic dim")
    if s.source != "model":
        line.append(f"  (rules{': ' + s.error if s.error else ''})", style="dim")
    return line


def render_tree(result: PatentResult, elements: bool = True) -> Tree:
    """A rich Tree of the claim set: number, status, category, what the claim adds (a dependent
    claim's limitation, an independent claim's preamble), finding codes; with `elements`, an
    independent claim's elements under it, nested as the claim nests them; the claim's
    plain-language summary first under it when the LLM step ran. Claim 1's tree comes first."""
    by_number = {c.number: c for c in result.claims}
    summary = {s.claim: s for s in result.claim_summaries or []}
    codes: dict[int, list[str]] = {}
    for f in result.findings:
        for n in f.claims[:1]:
            codes.setdefault(n, []).append(f.code)
    info = frozenset(f.code for f in result.findings if f.severity == "info")
    root = Tree(Text(f"{result.document.source_name}: {counts_line(result)}; {len(result.findings)} findings",
                     style="bold"))

    def add(parent: Tree, t: TreeNode) -> None:
        c = by_number[t.number]
        if t.repeat:  # a claim with several parents: spelled out at its first appearance only
            parent.add(Text.assemble((f"{t.number}", "bold"), (" (also under another parent, see above)", "dim")))
            return
        label = _label(c, sorted(set(codes.get(t.number, []))), t.label or None, info)
        if t.continued:
            label.append("  (continued below)", style="dim")
        branch = parent.add(label)
        if t.number in summary:
            branch.add(_summary_line(summary[t.number]))
        if elements and c.independent:
            _add_parts(branch, c)
        for k in t.children:
            add(branch, k)

    for t in ordered_trees(result):
        add(root, t)
    if result.unattached:
        ua = root.add(Text("not attached to an independent claim", style="dim"))
        for n in result.unattached:
            ua.add(_label(by_number[n], sorted(set(codes.get(n, []))), info=info))
    cancelled = [c.number for c in result.claims if c.cancelled]
    if cancelled:
        root.add(Text("cancelled: " + ", ".join(map(str, cancelled)), style="dim"))
    return root


def _md(text: str) -> str:
    return " ".join(text.split()).replace("*", "\\*").replace("_", "\\_")


def summaries_markdown(result: PatentResult, number: int) -> str:
    """Markdown for claim `number`'s plain-language summary on the page: the sentence, where it
    comes from (model or rules) and its grounding, the claim's own spans it rests on (character
    offsets, share of its words), and the rules summary beside it; "" when the step did not run."""
    s = next((s for s in result.claim_summaries or [] if s.claim == number), None)
    if s is None:
        return ""
    head = "In plain words" if s.source == "model" else "In plain words (rules; the model gave none)"
    lines = [f"**{head}:** {_md(s.text)}",
             f"<small>grounding {s.grounding:.0%} of its words in the claim's own text"
             + (f" · {s.error}" if s.error else "") + "</small>"]
    if s.spans:
        lines.append("Rests on:")
        lines += [f"- “{_md(shorten(sp.span.text, 16))}” (chars {sp.span.char_start}–{sp.span.char_end}, "
                  f"{sp.share:.0%} of its words)" for sp in s.spans]
    if s.source == "model":
        lines.append(f"Rules summary: {_md(s.scaffold)}")
    return "\n\n".join(lines[:2]) + "\n\n" + "\n".join(lines[2:])


def summary_rows(result: PatentResult) -> list[dict]:
    """One row per summarised claim for a table: claim, summary, source, grounding, rules summary."""
    return [{"claim": s.claim, "summary": " ".join(s.text.split()), "source": s.source,
             "grounding": round(s.grounding, 2), "rules summary": s.scaffold} for s in result.claim_summaries or []]


def ordered_trees(result: PatentResult) -> list[TreeNode]:
    """The trees with the one holding the lowest claim number (claim 1's) first, then the others
    by their root's number; continuations last."""
    def lowest(t: TreeNode) -> int:
        best, stack = t.number, [t]
        while stack:
            n = stack.pop()
            best = min(best, n.number)
            stack.extend(n.children)
        return best

    return sorted(result.trees, key=lambda t: (t.continuation, lowest(t), t.number))


def render_tree_text(result: PatentResult, width: int = 100) -> str:
    """`render_tree` as plain text (no colour)."""
    console = Console(width=width, record=True, color_system=None, force_terminal=False, file=io.StringIO())
    console.print(render_tree(result))
    return console.export_text()


def _dot_escape(s: str) -> str:
    return s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def to_dot(result: PatentResult) -> str:
    """Graphviz DOT of the claim tree (edges parent -> dependent), for `st.graphviz_chart`: each
    node shows what its claim adds; the independent claims stand in one column, claim 1's on top."""
    flagged: dict[int, set[str]] = {}
    for f in result.findings:
        for n in f.claims[:1]:
            flagged.setdefault(n, set()).add(f.code)
    lines = [
        "digraph claims {",
        "  rankdir=LR;",
        "  ordering=out;",
        '  node [shape=box, style="rounded,filled", fillcolor="#ffffff", fontname="Helvetica", fontsize=10];',
        '  edge [color="#666666"];',
    ]
    numbers = {c.number for c in result.claims}
    for c in result.claims:
        words = claim_label(c, 8, 16)
        label = f"{c.number} · {c.category}"
        if c.status != "active":
            label += f" ({c.status})"
        if words:
            label += "\n" + words
        attrs = [f'label="{_dot_escape(label)}"']
        if c.independent and not c.cancelled:
            attrs.append('fillcolor="#e8f0fe"')
        if c.cancelled:
            attrs.append('style="rounded,dashed"')
            attrs.append('fontcolor="#999999"')
        if c.number in flagged:
            attrs.append('color="#d93025"')
            attrs.append("penwidth=2")
            attrs.append(f'tooltip="{_dot_escape(", ".join(sorted(flagged[c.number])))}"')
        lines.append(f'  "{c.number}" [{", ".join(attrs)}];')
    for c in result.claims:
        for p in c.depends_on:
            if p in numbers and p != c.number:
                lines.append(f'  "{p}" -> "{c.number}";')
    roots = [t.number for t in ordered_trees(result) if not t.continuation]
    if len(roots) > 1:  # the roots in one column, claim 1's tree on top
        chain = " -> ".join(f'"{n}"' for n in roots)
        lines.append(f"  {{ rank=same; {chain} [style=invis]; }}")
    lines.append("}")
    return "\n".join(lines) + "\n"
