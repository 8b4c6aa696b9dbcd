"""The claim tree: a networkx DiGraph (parent -> dependent claim) and the nested trees of the
export (`PatentResult.trees`, `unattached`)."""

from __future__ import annotations

import networkx as nx

from pipelines.patents.model import Claim, TreeNode

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


def build_trees(claims: list[Claim], g: nx.DiGraph, finding_codes: dict[int, list[str]]) -> tuple[list[TreeNode], list[int]]:
    """Nested trees, one per independent claim (plus continuations), and the unattached claims."""
    by_number = {c.number: c for c in claims}
    expanded: set[int] = set()
    reached: set[int] = set()
    queue: list[int] = []
    children = {n: sorted(k for k in g.successors(n) if not by_number[k].cancelled) for n in g.nodes}

    def node(n: int, depth: int, path: set[int], continuation: bool = False) -> TreeNode:
        c = by_number[n]
        reached.add(n)
        kids = children[n]
        base = {"number": n, "status": c.status, "category": c.category, "findings": finding_codes.get(n, []),
                "continuation": continuation}
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
