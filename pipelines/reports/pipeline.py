"""The reports pipeline: a research report (PDF, or text) in, its targets and every mention
resolved out, as a deterministic `ReportResult`.

`analyse_document(doc, pdf_bytes=None)` is the whole analysis; `ReportsPipeline` wraps it for the
batch runner and the CLI (it re-reads the PDF bytes of an input for drawn objects, tables and
links). With an `LLMRun` (`llm=`, mode auto/on) two LLM steps run (pipelines.reports.llm_steps):
`reports.scope` decides the mentions whose internal/external reading the rules were unsure of, by
scoring fused with the rules, and `reports.deep_summary` quotes the key sentences of each section and of the
whole with every figure/table callout resolved and described. Without one (or mode off) the result
is the rules-only one, byte for byte.
"""

from __future__ import annotations

import re
from pathlib import Path

from pipelines.base import Pipeline, PipelineInput, ResultBase
from pipelines.documents import Document, IngestLimits, load_document
from pipelines.reports.floats import attach_objects, describe, find_captions
from pipelines.reports.labels import FLOAT_KINDS, printed_number
from pipelines.reports.layout import build_layout
from pipelines.reports.mentions import Found, Ref, Resolver
from pipelines.reports.models import SCHEMA_VERSION, Mention, ReportResult, Target, Unresolved
from pipelines.reports.structure import find_bibliography, find_equations, find_footnotes, find_sections

VERSION = "0.2.0"


def _slug(s: str) -> str:
    return re.sub(r"[^\w.-]+", "-", s, flags=re.UNICODE).strip("-").lower() or "x"


def _unique(rid: str, used: set[str], page: int) -> str:
    if rid not in used:
        used.add(rid)
        return rid
    k = 2
    cand = f"{rid}-p{page}"
    while cand in used:
        cand = f"{rid}-p{page}-{k}"
        k += 1
    used.add(cand)
    return cand


def analyse_document(doc: Document, pdf_bytes: bytes | None = None, input_sha256: str = "", *,
                     llm=None, summary_strategy: str = "auto", llm_steps=None) -> ReportResult:
    """Targets, mentions and their resolution for one document. `pdf_bytes` (the PDF the document
    was read from) adds drawn objects, tables and internal links; without it the text and
    character boxes alone are used. `llm`: a pipelines.llm.LLMRun for the LLM steps (None or mode
    off: rules only); `summary_strategy`: the deep summary's ("auto" = "key sentences", the only one);
    `llm_steps`: the names of the LLM steps to consider (None: all; an evaluator measuring one)."""
    layout = build_layout(doc, pdf_bytes)
    try:
        return _analyse(doc, layout, input_sha256, llm if llm is not None and llm.active else None, summary_strategy,
                        llm_steps)
    finally:
        layout.close()


def _analyse(doc: Document, layout, input_sha256: str, llm=None, summary_strategy: str = "auto",
             llm_steps=None) -> ReportResult:
    warnings: list[str] = []
    if doc.metadata.get("pages_without_text"):
        warnings.append(f"pages without a text layer (scanned?): {doc.metadata['pages_without_text']}")
    if doc.source_format == "pdf" and not layout.has_pdf:
        warnings.append("PDF bytes not given: figure boxes, tables and internal links not read")
    caps = find_captions(doc, layout)
    attach_objects(doc, layout, caps)
    bib = find_bibliography(doc, layout)
    float_boxes = [(c.line.page, c.bbox) for c in caps if c.bbox]
    notes = find_footnotes(doc, layout, exclude=[(b.start, b.end) for b in bib])
    notes = [n for n in notes if not any(p == n.page and (bb := doc.bbox_of(n.start, n.end)) and _inside(bb, box) for p, box in float_boxes)]
    sections = find_sections(doc, layout)
    equations = find_equations(doc, layout)

    used: set[str] = set()
    targets: list[Target] = []
    refs: list[Ref] = []
    excluded: list[tuple[int, int]] = []
    for c in caps:
        rid = _unique(f"{c.kind}-{_slug(c.number)}", used, c.line.page)
        span = doc.trimmed_span(c.start, c.end)
        targets.append(Target(
            id=rid, kind=c.kind, label=c.label, number=printed_number(c.label) or c.number, caption=c.caption, description=describe(c),
            page=c.line.page, bbox=c.bbox, span=span, rows=c.rows, continued_on=sorted(set(c.continued_on)),
            evidence="caption: " + ", ".join(c.evidence),
        ))
        refs.append(Ref(rid, c.kind, c.number, c.start, c.line.page, c.caption))
        excluded.extend(c.label_spans)
    for items, prefix, evidence in (
        (sections, "section", "numbered heading"),
        (notes, "footnote", "note at the page foot"),
        (bib, "ref", "bibliography entry"),
        (equations, "equation", "numbered equation"),
    ):
        for it in items:
            key = it.number if prefix != "footnote" else f"{it.page}-{it.number}"
            if prefix == "ref" and not it.number:
                key = _slug(it.label)[:40]
            rid = _unique(f"{prefix}-{_slug(key)}", used, it.page)
            start, end = it.extra.get("line", (it.start, it.end))
            span = doc.trimmed_span(start, end)
            kind = "reference" if prefix == "ref" else prefix
            text = re.sub(r"\s*\n\s*", " ", span.text)
            targets.append(Target(
                id=rid, kind=kind, label=it.label, number=printed_number(it.label) if prefix == "equation" else it.number,
                caption=text[:300], description=text[:300],
                page=it.page, bbox=span.bbox, span=span, evidence=evidence,
            ))
            refs.append(Ref(rid, kind, it.number, start, it.page, text))
            if prefix == "ref":
                excluded.append((it.start, it.end))
    resolver = Resolver(doc, layout, refs, excluded)
    section_starts = {r.start for r in refs if r.kind == "section"}
    found: list[Found] = []
    taken = bytearray(len(doc.text) + 1)  # characters already inside a mention (earlier groups win)
    floats = resolver.find_floats()
    for group in (
        floats,
        resolver.find_chains(),
        resolver.find_deictic(),
        resolver.find_citations(),
        [f for f in resolver.find_sections() if f.start not in section_starts and not _in_heading(f, refs)],
        resolver.find_equations(),
        resolver.find_footnote_marks(),
        resolver.find_bare_numbers(floats),
    ):
        for f in group:
            if not any(taken[f.start:f.end]):
                found.append(f)
                taken[f.start:f.end] = b"\x01" * (f.end - f.start)
    scoped = None
    if llm is not None and (llm_steps is None or "reports.scope" in llm_steps):
        from pipelines.reports.llm_steps import run_scope

        scoped = run_scope(llm, doc, resolver, found)
    resolver.resolve_chains(found)
    found.sort(key=lambda f: (f.start, f.end))

    mentions: list[Mention] = []
    unresolved: list[Unresolved] = []
    for f in found:
        span = f.span.source()
        mentions.append(Mention(
            text=span.text, span=span, page=span.page, bbox=span.bbox, boxes=_line_boxes(doc, f.start, f.end),
            kind=f.kind, targets=f.targets,
            resolution=f.resolution, hops=f.hops, confidence=round(f.confidence, 3), reason=f.reason, panel=f.panel,
        ))
        if f.resolution in ("unresolved", "ambiguous"):
            unresolved.append(Unresolved(
                text=span.text, span=span, page=span.page, kind=f.kind, why=f.why or "no_such_number",
                reason=f.reason, candidates=f.candidates,
            ))
    referenced = {t for m in mentions for t in m.targets}
    unreferenced = [t.id for t in targets if t.id not in referenced]
    stats = {
        "targets": len(targets),
        "figures_tables": sum(1 for t in targets if t.kind in FLOAT_KINDS),
        "mentions": len(mentions),
        "resolved": sum(1 for m in mentions if m.resolution == "internal"),
        "external": sum(1 for m in mentions if m.resolution == "external"),
        "unresolved": len(unresolved),
        "unreferenced_targets": len(unreferenced),
        "internal_links": sum(len(p.links) for p in layout.pages.values()),
    }
    result = ReportResult(
        **ReportsPipeline.header([doc], input_sha256),
        document=doc.info(), targets=targets, mentions=mentions, unresolved=unresolved,
        unreferenced_targets=unreferenced, stats=stats, warnings=warnings,
    )
    if llm is not None:
        from pipelines.reports.llm_steps import run_deep_summary, scope_decisions

        result.scope = scope_decisions(doc, scoped, found)
        if llm_steps is None or "reports.deep_summary" in llm_steps:
            result.deep_summary = run_deep_summary(llm, doc, result, summary_strategy)
        result.llm = llm.report()
    return result


def _line_boxes(doc: Document, start: int, end: int) -> list:
    """Boxes of a span, one per line (a mention can wrap: 'Fig.' at a line end, '3' on the next),
    on the span's page only (the boxes are drawn on that page; a mention can run onto the next)."""
    if doc.char_boxes is None:
        return []
    out, pos, page = [], start, doc.page_of(start)
    for part in doc.text[start:end].split("\n"):
        box = doc.bbox_of(pos, pos + len(part)) if part.strip() and doc.page_of(pos) == page else None
        if box is not None:
            out.append(box)
        pos += len(part) + 1
    return out


def _inside(a, b, pad: float = 2.0) -> bool:
    return a[0] >= b[0] - pad and a[1] >= b[1] - pad and a[2] <= b[2] + pad and a[3] <= b[3] + pad


def _in_heading(f: Found, refs: list[Ref]) -> bool:
    return any(r.kind == "section" and r.start <= f.start < r.start + len(r.text) for r in refs)


class ReportsPipeline(Pipeline):
    """Research-report reference resolution."""

    name = "reports"
    title = "Research reports: every 'see Figure 3' resolved"
    version = VERSION
    schema_version = SCHEMA_VERSION
    result_model = ReportResult

    def run_input(self, inp: PipelineInput, limits: IngestLimits | None = None, llm=None) -> ResultBase:
        path = inp.paths[0]
        doc = load_document(path, limits=limits)
        data = Path(path).read_bytes() if doc.source_format == "pdf" else None
        return analyse_document(doc, data, input_sha256=inp.content_sha256(), llm=llm)

    def run_documents(self, docs: list[Document], input_sha256: str = "", *, llm=None) -> ResultBase:
        if len(docs) != 1:
            raise ValueError("the reports pipeline analyses one document at a time")
        return analyse_document(docs[0], None, input_sha256=input_sha256, llm=llm)

    def structure_answerer(self, result: ResultBase, docs: list[Document]):
        """Questions the resolved references answer exactly (pipelines.reports.answers)."""
        from pipelines.reports.answers import structure_answer

        return lambda question: structure_answer(result, docs[0], question)

    def summary_line(self, result: ResultBase) -> str:
        s = getattr(result, "stats", {})
        return (f"{s.get('figures_tables', 0)} figures/tables, {s.get('mentions', 0)} mentions "
                f"({s.get('resolved', 0)} resolved, {s.get('external', 0)} external, {s.get('unresolved', 0)} unresolved)")
