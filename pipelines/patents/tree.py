"""The claim tree: a networkx DiGraph (parent -> dependent claim), the nested trees of the
export (`PatentResult.trees`, `unattached`) and each node's label (`claim_label`: what a dependent
claim adds, an independent claim's preamble, shortened)."""

from __future__ import annotations

import re

import networkx as nx

from pipelines.patents.model import Claim, TreeNode
from pipelines.text.script import CJK_WIDE, has_cjk

MAX_DEPTH = 40  # nesting deeper than this continues as a separate entry (JSON parsers cap nesting)


def build_graph(claims: list[Claim]) -> nx.DiGraph:
    """Nodes: claim numbers (with status, category, independent); edges: parent -> dependent.
    Self-references and references to claims that are not in the set make no edge."""
    g = nx.DiGraph()
    numbers = {c.number for c in claims}
    for c in claims:
        g.add_node(c.number, status=c.status, category=c.category, independent=c.independent)
    for c in claims:
        for p in c.depends_on:
            if p in numbers and p != c.number:
                g.add_edge(p, c.number)
    return g


_CLAIM_NUMBER = re.compile(r"^\s*(?:\[?\s*claims?\s*)?\d{1,4}\s*[.、．)\]:]*\s*(?:\([^)]{0,40}\)\s*)?", re.IGNORECASE)


_CJK_GAP = re.compile(f"(?<=[{CJK_WIDE}]) +|(?<=[，。；：、]) +| +(?=[{CJK_WIDE}])")


def shorten(text: str, n_words: int = 12, n_cjk: int = 28) -> str:
    """`text` on one line, cut to `n_words` words (or `n_cjk` characters of Chinese) with "…"."""
    head = text[: 40 * max(n_words, n_cjk)]  # enough for the label; the rest only says "…"
    cut = len(head) < len(text.rstrip())
    t = " ".join(head.split())
    if has_cjk(t[:10]):
        t = _CJK_GAP.sub("", t)  # a line break inside Chinese text is no space
        return t[:n_cjk] + ("…" if cut or len(t) > n_cjk else "")
    words = t.split(" ")
    return " ".join(words[:n_words]) + ("…" if cut or len(words) > n_words else "")


def claim_label(c: Claim, n_words: int = 12, n_cjk: int = 28) -> str:
    """What the reader sees for a claim: a dependent claim's limitation ("wherein the housing
    cover has a hanging rib…", "其特征在于…"), else the claim's start without its number; shortened."""
    if c.cancelled:
        return ""
    if not c.independent and c.limitation is not None:
        return shorten(c.limitation.text, n_words, n_cjk)
    text = c.preamble.text if c.independent and c.preamble is not None else _CLAIM_NUMBER.sub("", c.text, count=1)
    return shorten(text, n_words, n_cjk)


def build_trees(claims: list[Claim], g: nx.DiGraph, finding_codes: dict[int, list[str]]) -> tuple[list[TreeNode], list[int]]:
    """Nested trees, one per independent claim (plus continuations), and the unattached claims."""
    by_number = {c.number: c for c in claims}
    expanded: set[int] = set()
    reached: set[int] = set()
    queue: list[int] = []
    labels: dict[int, str] = {}
    children = {n: sorted(k for k in g.successors(n) if not by_number[k].cancelled) for n in g.nodes}

    def node(n: int, depth: int, path: set[int], continuation: bool = False) -> TreeNode:
        c = by_number[n]
        reached.add(n)
        kids = children[n]
        if n not in labels:
            labels[n] = claim_label(c)
        base = {"number": n, "status": c.status, "category": c.category, "label": labels[n],
                "findings": finding_codes.get(n, []), "continuation": continuation}
        if n in path or (n in expanded and not continuation):
            return TreeNode(**base, repeat=bool(kids))
        expanded.add(n)
        if not kids:
            return TreeNode(**base)
        if depth >= MAX_DEPTH:
            queue.append(n)
            return TreeNode(**base, continued=True)
        path.add(n)
        subtrees = [node(k, depth + 1, path) for k in kids]
        path.discard(n)
        return TreeNode(**base, children=subtrees)

    trees = [node(c.number, 0, set()) for c in claims if c.independent and not c.cancelled]
    i = 0
    while i < len(queue):
        trees.append(node(queue[i], 0, set(), continuation=True))
        i += 1
    unattached = sorted(c.number for c in claims if not c.cancelled and not c.independent and c.number not in reached)
    return trees, unattached
