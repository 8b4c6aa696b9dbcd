"""Findings over a parsed claim set: each a code, a severity, a message, the claims and the spans.

Codes:
- no_claims_found (error): no claims section or no claim in it.
- numbering_gap (warning): claim numbers missing between two claims (or before the first).
- claim_number_limit (warning): the last claim is numbered `MAX_CLAIM_NUMBER` and its text holds a
  line that opens like a higher-numbered claim: the reader stops at that number, said, never silent.
- missing_reference (error): a reference to a claim that is not in the set.
- forward_reference (error): a reference to a later claim.
- self_reference (error): a claim that refers to itself.
- cycle (error): claims that depend on each other in a circle.
- reference_to_cancelled (error): a reference to a cancelled claim.
- multiple_dependent_on_multiple (error): a multiple dependent claim that serves as a basis for
  another multiple dependent claim, directly or through single dependencies (37 CFR 1.75(c);
  CNIPA applies the same rule).
- conjunctive_multiple_dependency (error in US style, warning otherwise): "claims 1 and 2" — a
  multiple dependent claim must refer to the others in the alternative only.
- category_mismatch (info): a dependent claim of another category than its parent ("A method of
  using the apparatus of claim 1"); kept dependent, as the USPTO markup does.
- antecedent_basis (warning): "the X"/"said X"/"所述X" with no earlier X in the claim or its parents,
  naming the claims outside the chain that introduce X when there are any ("the housing cover" of
  a claim whose chain is 5 -> 4 -> 1, introduced in claim 3).
- antecedent_basis_inherent (info): "the X of the Y" where Y has antecedent basis ("the udder of
  the animal"): X reads as an inherent part of Y.
"""

from __future__ import annotations

import re

import networkx as nx

from pipelines.documents import Document, SourceSpan
from pipelines.patents.antecedent import Missing
from pipelines.patents.model import Claim, Finding

SEVERITY_ORDER = {"error": 0, "warning": 1, "info": 2}
MAX_CLAIM_NUMBER = 9999  # claim numbers are read with up to four digits
_HIGHER = re.compile(r"(?m)^[ \t]*\d{5,}[ \t]*[.、]")


def _f(code: str, severity: str, message: str, claims: list[int], spans: list[SourceSpan]) -> Finding:
    spans = sorted({(s.char_start, s.char_end): s for s in spans}.values(), key=lambda s: (s.char_start, s.char_end))
    return Finding(code=code, severity=severity, message=message, claims=claims, spans=spans)


def _fmt(nums: list[int]) -> str:
    nums = sorted(set(nums))
    if len(nums) > 6:
        return f"{', '.join(map(str, nums[:5]))}, … {nums[-1]}"
    return ", ".join(map(str, nums))


def _antecedent_finding(doc: Document, number: int, m: Missing, graph: nx.DiGraph, language: str) -> Finding:
    """An antecedent-basis finding: a warning, naming the claims outside the chain that introduce
    the term; or, for an inherent part of a thing with basis ("the udder of the animal"), info."""
    phrase = doc.text[m.start : m.end]
    if m.owner_end is not None:
        whole = doc.text[m.start : m.owner_end]
        return _f("antecedent_basis_inherent", "info",
                  f"Claim {number}: \"{phrase}\" is not introduced, but \"{whole}\" reads as an inherent part of a "
                  "thing with antecedent basis.", [number], [doc.span(m.start, m.owner_end)])
    word = "所述" if language == "zh" else "the/said"
    chain = sorted(nx.ancestors(graph, number)) if number in graph else []
    where = f"claim {number} or the claims it depends on ({_fmt(chain)})" if chain else f"claim {number}"
    message = f"Claim {number}: \"{phrase}\" ({word} {m.head}) has no antecedent in {where}"
    if m.introduced_in:
        what = "claim" if len(m.introduced_in) == 1 else "claims"
        message += f"; it is introduced in {what} {_fmt(list(m.introduced_in))}, outside this claim's chain"
    return _f("antecedent_basis", "warning", message + ".", [number], [doc.span(m.start, m.end)])


def compute_findings(
    doc: Document,
    claims: list[Claim],
    graph: nx.DiGraph,
    antecedents: dict[int, list[Missing]],
    language: str,
    section_found: bool,
) -> list[Finding]:
    """All findings, sorted by (first claim, severity, code, position)."""
    out: list[Finding] = []
    if not section_found or not claims:
        out.append(_f("no_claims_found", "error", "No claims section or numbered claim was found.", [], []))
        return out
    by_number = {c.number: c for c in claims}
    numbers = sorted(by_number)
    # numbering
    prev = 0
    for n in numbers:
        if n > prev + 1:
            missing = list(range(prev + 1, n))
            what = "claim" if len(missing) == 1 else "claims"
            out.append(_f("numbering_gap", "warning", f"{what} {_fmt(missing)} not found before claim {n}.",
                          [n], [by_number[n].span]))
        prev = n
    last = by_number[numbers[-1]]
    if numbers[-1] >= MAX_CLAIM_NUMBER and _HIGHER.search(last.span.text):
        out.append(_f("claim_number_limit", "warning",
                      f"Claims are read up to number {MAX_CLAIM_NUMBER:,}; the text after claim {numbers[-1]:,} holds "
                      "higher-numbered claims, which are read as part of it.", [numbers[-1]], [last.span]))
    us_style = language == "en"
    # claims that are, or rest on, a multiple dependent claim (no recursion: long chains are fine)
    if all(p < n for p, n in graph.edges):
        rests: dict[int, bool] = {}
        for n in sorted(graph.nodes):
            rests[n] = by_number[n].multiple_dependent or any(rests[p] for p in graph.predecessors(n))
    else:
        rests = {n: by_number[n].multiple_dependent
                 or any(by_number[a].multiple_dependent for a in nx.ancestors(graph, n) if a != n)
                 for n in graph.nodes}

    def tainted(n: int) -> bool:
        return rests.get(n, False)

    for c in claims:
        if c.cancelled:
            continue
        for r in c.references:
            if r.kind == "external":
                continue
            targets = r.claims
            if not targets:
                out.append(_f("missing_reference", "error",
                              f"Claim {c.number} refers to preceding claims but no claim comes before it.",
                              [c.number], [r.span]))
                continue
            selfs = [t for t in targets if t == c.number]
            missing = [t for t in targets if t not in by_number]
            forward = [t for t in targets if t > c.number and t in by_number]
            cancelled = [t for t in targets if t in by_number and by_number[t].cancelled]
            if selfs:
                out.append(_f("self_reference", "error", f"Claim {c.number} refers to itself.", [c.number], [r.span]))
            if missing:
                out.append(_f("missing_reference", "error",
                              f"Claim {c.number} refers to claim {_fmt(missing)}, which is not in the claim set.",
                              [c.number, *sorted(missing)], [r.span]))
            if forward:
                out.append(_f("forward_reference", "error",
                              f"Claim {c.number} refers to later claim {_fmt(forward)}; a dependent claim must refer back.",
                              [c.number, *sorted(forward)], [r.span]))
            if cancelled:
                out.append(_f("reference_to_cancelled", "error",
                              f"Claim {c.number} refers to cancelled claim {_fmt(cancelled)}.",
                              [c.number, *sorted(cancelled)], [r.span]))
            if r.kind == "conjunctive":
                rule = " (37 CFR 1.75(c), MPEP 608.01(n))" if us_style else ""
                out.append(_f("conjunctive_multiple_dependency", "error" if us_style else "warning",
                              f"Claim {c.number} refers to claims {_fmt(r.claims)} together; a multiple dependent claim "
                              f"must refer to them in the alternative only{rule}.",
                              [c.number, *sorted(set(r.claims))], [r.span]))
        # a multiple dependent claim based, directly or through single dependencies, on a multiple
        # dependent claim (37 CFR 1.75(c): "either directly or indirectly")
        if c.multiple_dependent:
            direct = [p for p in c.depends_on if p in by_number and p != c.number and by_number[p].multiple_dependent]
            indirect = [
                p for p in c.depends_on
                if p in by_number and p != c.number and p not in direct and tainted(p)
            ]
            if direct or indirect:
                bases = sorted(direct + indirect)
                spans = [r.span for r in c.references if set(r.claims) & set(bases)]
                how = []
                if direct:
                    how.append(f"on multiple dependent claim {_fmt(direct)}")
                if indirect:
                    how.append(f"through claim {_fmt(indirect)} on a multiple dependent claim")
                out.append(_f("multiple_dependent_on_multiple", "error",
                              f"Multiple dependent claim {c.number} depends {' and '.join(how)} (37 CFR 1.75(c)).",
                              [c.number, *bases], spans))
        # category
        if not c.independent and c.category != "unknown":
            differing = [p for p in c.depends_on
                         if p in by_number and p != c.number and not by_number[p].cancelled
                         and by_number[p].category not in ("unknown", c.category)]
            if differing:
                cats = sorted({by_number[p].category for p in differing})
                spans = [s for s in (c.preamble,) if s is not None] or [c.span]
                out.append(_f("category_mismatch", "info",
                              f"Claim {c.number} ({c.category}) depends on claim {_fmt(differing)} "
                              f"({'/'.join(cats)}), a claim of another category.",
                              [c.number, *sorted(differing)], spans))
        for m in antecedents.get(c.number, []):
            out.append(_antecedent_finding(doc, c.number, m, graph, language))
    # cycles: strongly connected components of more than one claim
    forward_only = all(p < n for p, n in graph.edges)  # then there is no cycle to look for
    for comp in [] if forward_only else nx.strongly_connected_components(graph):
        if len(comp) > 1:
            members = sorted(comp)
            spans = [r.span for n in members for r in by_number[n].references if set(r.claims) & comp]
            out.append(_f("cycle", "error", f"Claims {_fmt(members)} depend on each other in a cycle.", members, spans))
    out.sort(key=lambda f: (f.claims[0] if f.claims else 0, SEVERITY_ORDER[f.severity], f.code,
                            f.spans[0].char_start if f.spans else -1, f.message))
    return out
