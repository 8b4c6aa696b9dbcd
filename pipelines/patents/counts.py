"""The claim counts a fee calculation needs, by the USPTO's counting rule.

37 CFR 1.75(c) and MPEP 608.01(n) ("Fees for multiple dependent claims"):
- an independent claim counts as one claim, and as one independent claim;
- a proper multiple dependent claim counts as the number of claims it refers to;
- a claim depending on a proper multiple dependent claim, directly or through single
  dependencies, counts as that multiple dependent claim does;
- an improper multiple dependent claim (based on another multiple dependent claim, or referring to
  claims together: "claims 1 and 2") counts as one, and so does a claim depending on it;
- the multiple dependent claim fee (37 CFR 1.16(j)) is due once when at least one multiple
  dependent claim is proper;
- excess claim fees start beyond 20 claims in all and beyond 3 independent claims.
Cancelled claims are not counted.
"""

from __future__ import annotations

import networkx as nx

from pipelines.patents.model import Claim, ClaimCounts, Finding

RULE = "USPTO: 37 CFR 1.75(c), MPEP 608.01(n); fees beyond 20 claims in all and 3 independent"
IMPROPER_CODES = ("multiple_dependent_on_multiple", "conjunctive_multiple_dependency")


def claim_counts(claims: list[Claim], graph: nx.DiGraph, findings: list[Finding]) -> ClaimCounts:
    """The counts of `claims` for a USPTO fee calculation (see the module docstring)."""
    by_number = {c.number: c for c in claims}
    live = [c for c in claims if not c.cancelled]
    improper = {f.claims[0] for f in findings if f.code in IMPROPER_CODES and f.claims}
    order = sorted(graph.nodes) if all(p < n for p, n in graph.edges) else (
        list(nx.topological_sort(graph)) if nx.is_directed_acyclic_graph(graph) else sorted(graph.nodes)
    )
    weight: dict[int, int] = {}
    for n in order:
        c = by_number[n]
        if c.cancelled:
            continue
        parents = [p for p in c.depends_on if p in by_number and p != n and not by_number[p].cancelled]
        if c.multiple_dependent:
            weight[n] = 1 if n in improper else len(parents) or 1
        elif len(parents) == 1 and not by_number[parents[0]].independent:
            weight[n] = weight.get(parents[0], 1)
        else:
            weight[n] = 1
    total_for_fees = sum(weight.get(c.number, 1) for c in live)
    independent = sum(1 for c in live if c.independent)
    return ClaimCounts(
        rule=RULE,
        independent=independent,
        total=len(live),
        multiple_dependent=sum(1 for c in live if c.multiple_dependent),
        total_for_fees=total_for_fees,
        counted_as={n: w for n, w in sorted(weight.items()) if w > 1},
        excess_total=max(0, total_for_fees - 20),
        excess_independent=max(0, independent - 3),
        multiple_dependent_fee=any(c.multiple_dependent and c.number not in improper for c in live),
    )
