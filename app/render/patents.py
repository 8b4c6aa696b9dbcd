"""Drawings of a `PatentResult`'s claim tree: a rich tree for the terminal (`render_tree`, and
`render_tree_text` as plain text) and Graphviz DOT for the UI (`to_dot`)."""

from __future__ import annotations

import io
import re

from rich.console import Console
from rich.text import Text
from rich.tree import Tree

from pipelines.patents import Claim, PatentResult, TreeNode
from pipelines.text.script import has_cjk


def first_words(text: str, n_words: int = 8, n_cjk: int = 18) -> str:
    """The start of a claim's text for labels, without its number."""
    t = re.sub(r"^\s*(?:\[?\s*claims?\s*)?\d{1,3}\s*[.、．)\]:]*\s*(?:\([^)]{0,40}\)\s*)?", "", text, flags=re.IGNORECASE)
    t = " ".join(t.split())
    if has_cjk(t[:10]):
        return t[:n_cjk] + ("…" if len(t) > n_cjk else "")
    words = t.split(" ")
    return " ".join(words[:n_words]) + ("…" if len(words) > n_words else "")


def _label(c: Claim, codes: list[str]) -> Text:
    label = Text()
    label.append(f"{c.number}", style="bold")
    if c.status != "active":
        label.append(f" ({c.status})", style="yellow")
    label.append(f" [{c.category}] ", style="cyan")
    label.append(first_words(c.text) if not c.cancelled else "", style="")
    for code in codes:
        label.append(f" ⚠ {code}", style="bold red")
    return label


def render_tree(result: PatentResult) -> Tree:
    """A rich Tree of the claim set: number, status, category, first words, finding codes."""
    by_number = {c.number: c for c in result.claims}
    codes: dict[int, list[str]] = {}
    for f in result.findings:
        for n in f.claims[:1]:
            codes.setdefault(n, []).append(f.code)
    root = Tree(Text(f"{result.document.source_name}: {result.stats.n_claims} claims, "
                     f"{result.stats.n_independent} independent, {len(result.findings)} findings", style="bold"))

    def add(parent: Tree, t: TreeNode) -> None:
        c = by_number[t.number]
        if t.repeat:  # a claim with several parents: spelled out at its first appearance only
            parent.add(Text.assemble((f"{t.number}", "bold"), (" (also under another parent, see above)", "dim")))
            return
        label = _label(c, sorted(set(codes.get(t.number, []))))
        if t.continued:
            label.append("  (continued below)", style="dim")
        branch = parent.add(label)
        for k in t.children:
            add(branch, k)

    for t in result.trees:
        add(root, t)
    if result.unattached:
        ua = root.add(Text("not attached to an independent claim", style="dim"))
        for n in result.unattached:
            ua.add(_label(by_number[n], sorted(set(codes.get(n, [])))))
    cancelled = [c.number for c in result.claims if c.cancelled]
    if cancelled:
        root.add(Text("cancelled: " + ", ".join(map(str, cancelled)), style="dim"))
    return root


def render_tree_text(result: PatentResult, width: int = 100) -> str:
    """`render_tree` as plain text (no colour)."""
    console = Console(width=width, record=True, color_system=None, force_terminal=False, file=io.StringIO())
    console.print(render_tree(result))
    return console.export_text()


def _dot_escape(s: str) -> str:
    return s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def to_dot(result: PatentResult) -> str:
    """Graphviz DOT of the claim tree (edges parent -> dependent), for `st.graphviz_chart`."""
    flagged: dict[int, set[str]] = {}
    for f in result.findings:
        for n in f.claims[:1]:
            flagged.setdefault(n, set()).add(f.code)
    lines = [
        "digraph claims {",
        "  rankdir=LR;",
        '  node [shape=box, style="rounded,filled", fillcolor="#ffffff", fontname="Helvetica", fontsize=10];',
        '  edge [color="#666666"];',
    ]
    numbers = {c.number for c in result.claims}
    for c in result.claims:
        words = first_words(c.text, 6, 12) if not c.cancelled else ""
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
    lines.append("}")
    return "\n".join(lines) + "\n"
