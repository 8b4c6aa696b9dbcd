"""From a Document to a PatentResult: section -> claims -> references -> structure -> findings -> tree.

Deterministic: no clocks, no sets in the output, every list sorted.
"""

from __future__ import annotations

import networkx as nx

from pipelines.base import result_header
from pipelines.documents import Document, SourceSpan
from pipelines.patents.antecedent import (
    ClaimTexts,
    Missing,
    check_chinese,
    check_english,
    letters_only,
    words_of,
)
from pipelines.patents.counts import claim_counts
from pipelines.patents.findings import compute_findings
from pipelines.patents.model import (
    SCHEMA_VERSION,
    Claim,
    ClaimPart,
    ClaimsSection,
    PatentResult,
    Reference,
    Stats,
)
from pipelines.patents.references import Ref, find_references
from pipelines.patents.section import CLAIM_START_LINE, find_section
from pipelines.patents.splitter import RawClaim, split_claims
from pipelines.patents.structure import Part, analyse_structure, nest_elements
from pipelines.patents.text import mask_furniture, normalise, trim
from pipelines.patents.tree import build_graph, build_trees
from pipelines.text.script import detect_language

PIPELINE_NAME = "patents"
PIPELINE_VERSION = "0.1.0"


def claims_language(text: str) -> str:
    """ "zh" when Han characters are at least a quarter of the Han and ASCII letters in the first
    4000 characters of `text` (Chinese claims keep Latin reference signs and names), else "en"."""
    return detect_language(text[:4000], 0.25, "latin", inclusive=True)


def _claim_text(doc: Document, start: int, end: int, blanked: list[tuple[int, int]]) -> str:
    """The claim's text with blanked furniture lines cut out."""
    if not blanked:
        return doc.text[start:end]
    parts = []
    pos = start
    for a, b in blanked:
        if b <= start or a >= end:
            continue
        parts.append(doc.text[pos:a])
        pos = b + 1 if b < end and doc.text[b : b + 1] == "\n" else b
    parts.append(doc.text[pos:end])
    return "".join(parts)


def _span(doc: Document, norm: str, a: int, b: int) -> SourceSpan:
    a, b = trim(norm, a, b)
    return doc.span(a, b)


def analyse_document(doc: Document, input_sha256: str = "") -> PatentResult:
    """Run the claim-tree analysis over one document."""
    norm = normalise(doc.text)
    sec = find_section(norm)
    blanked: list[tuple[int, int]] = []
    raws: list[RawClaim] = []
    if sec.method != "none":
        norm, blanked = mask_furniture(norm, sec.start, sec.end, protect=CLAIM_START_LINE)
        raws = split_claims(norm, sec.start, sec.end)
    language = claims_language(norm[sec.start : sec.end] if sec.end > sec.start else norm)
    zh = language == "zh"
    wrapped = doc.source_format == "pdf"

    claims: list[Claim] = []
    refs_by_claim: dict[int, list[Ref]] = {}
    for raw in raws:
        cancelled = raw.status in ("canceled",) or raw.status.startswith("canceled")
        single = len(raw.numbers) == 1
        span = _span(doc, norm, raw.start, raw.end)
        status_span = doc.span(raw.status_start, raw.status_end) if raw.status_start is not None else None
        text = _claim_text(doc, span.char_start, span.char_end, blanked)
        for number in raw.numbers:
            refs: list[Ref] = []
            if single and not cancelled and raw.body_start < raw.end:
                refs = find_references(norm, raw.body_start, raw.end, number)
            refs_by_claim[number] = refs
            deps = sorted({n for r in refs if r.kind != "external" for n in r.claims if n != number})
            independent = not cancelled and not deps
            has_refs = any(r.kind != "external" and r.claims for r in refs)
            struct = None
            if single and not cancelled:
                struct = analyse_structure(
                    norm, raw.body_start, raw.end, [(r.start, r.end) for r in refs], zh, dependent=has_refs,
                    wrapped=wrapped,
                )
            elements = [doc.span(a, b) for a, b in struct.elements] if struct else []
            references = [
                Reference(text=doc.text[r.start : r.end], span=doc.span(r.start, r.end), claims=list(r.claims), kind=r.kind)
                for r in refs
            ]
            claims.append(
                Claim(
                    number=number,
                    status=raw.status,
                    cancelled=cancelled,
                    independent=independent,
                    depends_on=deps,
                    multiple_dependent=len(deps) > 1,
                    references=references,
                    category=struct.category if struct else "unknown",
                    subject=struct.subject if struct else None,
                    preamble=doc.span(*struct.preamble) if struct and struct.preamble else None,
                    transition=doc.span(*struct.transition) if struct and struct.transition else None,
                    transition_kind=struct.transition_kind if struct else None,
                    elements=elements,
                    parts=_parts(elements, nest_elements(norm, struct.elements)) if struct and len(elements) > 1 else [],
                    limitation=doc.span(*struct.limitation) if struct and struct.limitation else None,
                    text=text,
                    span=span,
                    status_span=status_span,
                )
            )
    claims.sort(key=lambda c: c.number)
    graph = build_graph(claims)
    antecedents = _antecedents(norm, claims, raws, refs_by_claim, graph, zh)
    findings = compute_findings(doc, claims, graph, antecedents, language, sec.method != "none")
    codes: dict[int, list[str]] = {}
    for f in findings:
        if f.claims:
            lst = codes.setdefault(f.claims[0], [])
            if f.code not in lst:
                lst.append(f.code)
    trees, unattached = build_trees(claims, graph, {k: sorted(v) for k, v in codes.items()})

    section = ClaimsSection(found=sec.method != "none", method=sec.method)
    if sec.heading_start is not None and sec.heading_end is not None:
        section.heading_span = doc.span(sec.heading_start, sec.heading_end)
        section.heading = section.heading_span.text
    if sec.method != "none" and sec.end > sec.start:
        section.span = _span(doc, norm, sec.start, sec.end)

    return PatentResult(
        **result_header(PIPELINE_NAME, PIPELINE_VERSION, SCHEMA_VERSION, [doc], input_sha256),
        document=doc.info(),
        language=language,
        claims_section=section,
        claims=claims,
        findings=findings,
        trees=trees,
        unattached=unattached,
        stats=_stats(claims, findings, graph),
    )


def _parts(elements: list[SourceSpan], parts: list[Part]) -> list[ClaimPart]:
    """Nested elements as export models over the claim's element spans (the same objects; no
    recursion, so any depth is safe); none when no element holds others."""
    if not any(p.parts for p in parts):
        return []  # flat: `elements` says it all
    span_of = {(e.char_start, e.char_end): e for e in elements}
    out: list[ClaimPart] = []
    stack: list[tuple[list[Part], list[ClaimPart]]] = [(parts, out)]
    while stack:
        src, dst = stack.pop()
        for p in src:
            cp = ClaimPart.model_construct(span=span_of[(p.start, p.end)], parts=[])
            dst.append(cp)
            if p.parts:
                stack.append((p.parts, cp.parts))
    return out


def _ancestors(claims: list[Claim], graph: nx.DiGraph) -> dict[int, list[int]]:
    """Every claim's ancestors (sorted). Claims referring back only (the valid case) are done in
    one pass in number order; otherwise each claim's ancestors come from a graph search. No
    recursion, so a chain of 999 claims is fine."""
    if all(p < n for p, n in graph.edges):
        acc: dict[int, frozenset[int]] = {}
        for n in sorted(graph.nodes):
            parents = list(graph.predecessors(n))
            acc[n] = frozenset(parents).union(*(acc[p] for p in parents)) if parents else frozenset()
        return {c.number: sorted(acc.get(c.number, ())) for c in claims}
    return {c.number: sorted(nx.ancestors(graph, c.number) - {c.number}) for c in claims}


def _antecedents(
    norm: str,
    claims: list[Claim],
    raws: list[RawClaim],
    refs_by_claim: dict[int, list[Ref]],
    graph: nx.DiGraph,
    zh: bool,
) -> dict[int, list[Missing]]:
    """Antecedent-basis misses per claim, the ancestors' words inherited."""
    body: dict[int, tuple[int, int]] = {}
    for raw in raws:
        if len(raw.numbers) == 1:
            body[raw.numbers[0]] = (raw.body_start, raw.end)
    words_cache: dict[int, set[str]] = {}
    out: dict[int, list[Missing]] = {}
    ancestors_of = _ancestors(claims, graph)
    live = [c.number for c in claims if not c.cancelled and c.number in body]

    def word_set(n: int) -> set[str]:
        if n not in words_cache:
            words_cache[n] = words_of(norm[body[n][0] : body[n][1]])
        return words_cache[n]

    texts = None
    compact: dict[int, str] = {}  # Chinese: each claim's text with whitespace removed
    if zh:
        compact = {n: "".join(norm[body[n][0] : body[n][1]].split()) for n in live}
    else:
        texts = ClaimTexts({n: norm[body[n][0] : body[n][1]] for n in live})
    for c in claims:
        if c.cancelled or c.number not in body:
            continue
        a, b = body[c.number]
        skip = [(r.start, r.end) for r in refs_by_claim.get(c.number, [])]
        ancestors = [n for n in ancestors_of.get(c.number, []) if n in body]
        if zh:
            inherited_text = "".join(compact[n] for n in ancestors if n in compact)
            chain = {c.number, *ancestors}
            outside = {n: t for n, t in compact.items() if n not in chain}
            hits = check_chinese(norm, a, b, skip, inherited_text, outside)
        else:
            sets = []
            for n in ancestors:
                sets.append(word_set(n))

            memo: list[str] = []

            def text_of(ancestors: list[int] = ancestors, memo: list[str] = memo) -> str:
                if not memo:
                    memo.append(letters_only("\n".join(norm[body[n][0] : body[n][1]] for n in ancestors)))
                return memo[0]

            chain = frozenset([c.number, *ancestors])
            hits = check_english(norm, a, b, skip, sets, text_of, texts, chain)
        if hits:
            out[c.number] = hits
    return out


def _refers_back_only(graph: nx.DiGraph) -> bool:
    """Every edge goes from a lower to a higher claim number (then the graph is a DAG and number
    order is a topological order)."""
    return all(p < n for p, n in graph.edges)


def _max_depth(claims: list[Claim], graph: nx.DiGraph) -> int:
    """Length of the longest dependency chain among live claims (0 when the graph has a cycle)."""
    live = {c.number for c in claims if not c.cancelled}
    depth: dict[int, int] = {}
    order = sorted(graph.nodes) if _refers_back_only(graph) else nx.topological_sort(graph)
    for n in order:
        ps = [depth[p] for p in graph.predecessors(n) if p in live]
        depth[n] = 1 + max(ps) if ps and n in live else 0
    return max((depth[n] for n in live), default=0)


def _stats(claims: list[Claim], findings: list, graph: nx.DiGraph) -> Stats:
    active = [c for c in claims if not c.cancelled]
    cats: dict[str, int] = {}
    for c in active:
        cats[c.category] = cats.get(c.category, 0) + 1
    sev: dict[str, int] = {}
    code: dict[str, int] = {}
    for f in findings:
        sev[f.severity] = sev.get(f.severity, 0) + 1
        code[f.code] = code.get(f.code, 0) + 1
    is_dag = _refers_back_only(graph) or nx.is_directed_acyclic_graph(graph)
    max_depth = _max_depth(claims, graph) if is_dag else 0
    return Stats(
        n_claims=len(claims),
        n_active=len(active),
        n_cancelled=len(claims) - len(active),
        n_independent=sum(1 for c in active if c.independent),
        n_dependent=sum(1 for c in active if not c.independent),
        n_multiple_dependent=sum(1 for c in active if c.multiple_dependent),
        max_depth=int(max_depth),
        categories=dict(sorted(cats.items())),
        findings_by_severity=dict(sorted(sev.items())),
        findings_by_code=dict(sorted(code.items())),
        is_dag=is_dag,
        claim_counts=claim_counts(claims, graph, findings),
    )
