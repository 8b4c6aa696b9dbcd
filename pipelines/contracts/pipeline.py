"""The contracts pipeline: two versions of an agreement in, every clause aligned and every change
explained out (`ContractResult`).

`compare_documents(doc_a, doc_b)` is the whole pipeline on two `Document`s; `compare_texts(a, b)` the
same on two strings (CLI, UI and tests use both). `ContractsPipeline.discover` finds pairs in a
folder: `X.v1.*` / `X.v2.*`, a folder holding `v1.*` and `v2.*`, or a `pairs.csv` manifest
(`a,b[,id]` per line, paths relative to the folder).

Runs without the engine: structure, alignment, redline and flags are deterministic; MiniLM is used
only when asked for (`AlignConfig(semantic=True)`) and only for English — see BENCHMARKS.md for
why it is off by default. With an `LLMRun` whose mode is not off, the LLM steps of
`pipelines.contracts.llm_steps` (materiality fused with the flags, explanations, amendment summary)
run on the result.
"""

from __future__ import annotations

import csv
import re
from pathlib import Path

from pipelines.base import Pipeline, PipelineInput, is_candidate_file
from pipelines.contracts.align import AlignConfig, Pair, align
from pipelines.contracts.flags import (
    RawFlag,
    figure_flags,
    standard_flags,
    term_regex,
    word_flags,
    wording_flag,
)
from pipelines.contracts.llm_steps import StepSettings, run_llm_steps
from pipelines.contracts.model import (
    SCHEMA_VERSION,
    AlignmentRow,
    ClauseOut,
    ContractResult,
    ContractVersion,
    CrossReference,
    DiffOp,
    Flag,
    Settings,
    SummaryItem,
    clause_title,
)
from pipelines.contracts.redline import Op, body_tokens, diff_spans
from pipelines.contracts.structure import Clause, Structure, contract_language, parse_structure
from pipelines.documents import Document
from pipelines.llm import LLMRun
from pipelines.text.retrieval import MINILM_NAME, minilm_folder, minilm_model

MATERIAL_CHANGES = {"added", "deleted"}
# The order of material changes in the summary: what the change touches (obligations, money,
# standards, periods, parties, disclaimers) before added or deleted clauses, then the rest (dates,
# numbers, references, wording, splits and merges).
SEVERE_KINDS = {"obligation", "negation", "amount", "percentage", "duration", "standard", "party", "disclaimer"}
PRONOUN_TERMS = {"you", "your", "yours", "we", "us", "our", "ours", "i", "me", "my", "they", "them", "their"}


def _label(c: Clause) -> tuple[int, int] | None:
    return (c.label_start, c.label_end) if c.label_start is not None else None


def _separators(text: str, clauses: list[Clause]) -> list[str]:
    seps, pos = [], 0
    for c in clauses:
        seps.append(text[pos:c.start])
        pos = c.end
    seps.append(text[pos:])
    return seps


def _clause_out(doc: Document, c: Clause) -> ClauseOut:
    return ClauseOut(
        anchor=c.anchor, number=c.number, heading=c.heading, kind=c.kind, level=c.level, parent=c.parent,
        span=doc.span(c.start, c.end), defines=list(c.defines),
        xrefs=[CrossReference(target=x.target, anchor=x.anchor, external=x.external, span=doc.span(x.start, x.end))
               for x in c.xrefs],
    )


def _xref_flags(ca: Clause, cb: Clause, b_of_a: dict[str, str]) -> list[RawFlag]:
    """References whose target changed; those that only follow a renumbering are not material."""
    ra = [x for x in ca.xrefs]
    rb = [x for x in cb.xrefs]
    ka = [re.sub(r"\s+", "", x.text) for x in ra]
    kb = [re.sub(r"\s+", "", x.text) for x in rb]
    gone = [x for x, k in zip(ra, ka, strict=True) if ka.count(k) > kb.count(k)]
    new = [x for x, k in zip(rb, kb, strict=True) if kb.count(k) > ka.count(k)]
    out = []
    for k in range(max(len(gone), len(new))):
        g = gone[k] if k < len(gone) else None
        n = new[k] if k < len(new) else None
        follows = bool(g and n and g.anchor and n.anchor and b_of_a.get(g.anchor) == n.anchor)
        detail = f"{g.text if g else '—'} → {n.text if n else '—'}"
        detail += " (same clause, follows its renumbering)" if follows else (
            f" (now points to {n.anchor})" if n and n.anchor else "")
        out.append(RawFlag("cross_reference", (g.start, g.end) if g else None, (n.start, n.end) if n else None,
                           detail, material=not follows))
    return out


def compare_structures(doc_a: Document, sa: Structure, doc_b: Document, sb: Structure,
                       cfg: AlignConfig | None = None, input_sha256: str = "") -> ContractResult:
    cfg = cfg or AlignConfig()
    ta, tb = doc_a.text, doc_b.text
    A, B = sa.clauses, sb.clauses
    lang = "zh" if "zh" in (sa.language, sb.language) else "en"
    al = align(ta, sa, tb, sb, cfg)
    terms = set(sa.terms) | set(sb.terms)
    b_of_a = {A[p.a].anchor: B[p.b].anchor for p in al.pairs if p.a is not None and p.b is not None}

    rows: list[AlignmentRow] = []
    row_flags: list[list[RawFlag]] = []
    groups: dict[str, list[Pair]] = {}
    for p in al.pairs:
        if p.change in {"split", "merged"} and p.group:
            groups.setdefault(p.group, []).append(p)
    flagged_groups: set[str] = set()
    group_material: dict[str, bool] = {}  # split/merge group -> its words changed (not only their layout)
    first_rows: set[int] = set()
    for p in al.pairs:
        ops: list[Op]
        flags: list[RawFlag] = []
        if p.a is not None and p.b is not None:
            ca, cb = A[p.a], B[p.b]
            ops = diff_spans(ta, (ca.start, ca.end), _label(ca), tb, (cb.start, cb.end), _label(cb), lang)
            if p.change in {"split", "merged"} and p.group:
                # one set of flags per split/merge, on its first row, comparing all its clauses pooled
                if p.group not in flagged_groups:
                    flagged_groups.add(p.group)
                    first_rows.add(len(rows))
                    members = groups[p.group]
                    pa = [A[i] for i in sorted({m.a for m in members})]
                    pb = [B[j] for j in sorted({m.b for m in members})]
                    flags += figure_flags(ta, pa, tb, pb)
                    group_material[p.group] = _words(ta, pa, lang) != _words(tb, pb, lang)
            elif p.edited:
                flags += figure_flags(ta, ca, tb, cb)
                flags += word_flags(ta, ca, tb, cb, ops, lang, terms)
                flags += standard_flags(ta, tb, ops, lang)
                xrefs = _xref_flags(ca, cb, b_of_a)
                flags += xrefs
                if not any(f.material for f in flags):
                    following = [f.b for f in xrefs if not f.material and f.b]
                    w = wording_flag(ta, tb, ops, following)
                    flags += [w] if w else []
        elif p.a is not None:
            ca = A[p.a]
            ops = [Op("delete", ca.start, ca.end, 0, 0)]
        else:
            cb = B[p.b]
            ops = [Op("insert", 0, 0, cb.start, cb.end)]
        row_flags.append(flags)
        rows.append(_row(doc_a, doc_b, A, B, p, ops))

    _definition_flags(al.pairs, A, B, ta, tb, lang, row_flags)
    for row, flags in zip(rows, row_flags, strict=True):
        flags.sort(key=lambda f: not f.material)  # material flags first (stable within each group)
        row.flags = [
            Flag(kind=f.kind, a_span=doc_a.span(*f.a) if f.a else None, b_span=doc_b.span(*f.b) if f.b else None,
                 detail=f.detail, material=f.material)
            for f in flags
        ]

    reflow = {k for k, r in enumerate(rows) if r.group in group_material
              and (k not in first_rows or not group_material[r.group])}
    titles = ({c.anchor: clause_title(c.anchor, c.heading, c.kind) for c in A},
              {c.anchor: clause_title(c.anchor, c.heading, c.kind) for c in B})
    summary = _summary(rows, titles, reflow)
    stats: dict[str, int] = {"clauses_a": len(A), "clauses_b": len(B)}
    for ch in ("unchanged", "modified", "added", "deleted", "moved", "renumbered", "split", "merged"):
        stats[ch] = sum(1 for r in rows if r.change == ch)
    stats["edited"] = sum(1 for r in rows if r.edited)
    stats["material"] = sum(1 for s in summary if s.material)
    stats["flags"] = sum(len(r.flags) for r in rows)

    def version(doc: Document, s: Structure) -> ContractVersion:
        return ContractVersion(info=doc.info(), language=s.language, separators=_separators(doc.text, s.clauses))

    return ContractResult(
        **ContractsPipeline.header([doc_a, doc_b], input_sha256),
        documents={"a": version(doc_a, sa), "b": version(doc_b, sb)},
        clauses={"a": [_clause_out(doc_a, c) for c in A], "b": [_clause_out(doc_b, c) for c in B]},
        alignment=rows, summary=summary, stats=stats,
        settings=Settings(method="ngram+minilm" if al.semantic_used else "ngram", threshold=cfg.tau,
                          min_content=cfg.min_content,
                          w_anchor=cfg.w_anchor, w_context=cfg.w_context,
                          w_semantic=cfg.w_semantic if al.semantic_used else 0.0,
                          embedder=MINILM_NAME if al.semantic_used and minilm_folder() else None),
    )


def _row(doc_a: Document, doc_b: Document, A: list[Clause], B: list[Clause], p: Pair, ops: list[Op]) -> AlignmentRow:
    diff = []
    for o in ops:
        a_span = doc_a.span(o.a_start, o.a_end) if o.op != "insert" else None
        b_span = doc_b.span(o.b_start, o.b_end) if o.op != "delete" else None
        diff.append(DiffOp(op=o.op, a_span=a_span, b_span=b_span))
    return AlignmentRow(
        a=A[p.a].anchor if p.a is not None else None, b=B[p.b].anchor if p.b is not None else None,
        change=p.change, score=round(float(p.score), 4), edited=p.edited, renumbered=p.renumbered, moved=p.moved,
        group=p.group, diff=diff,
    )


def _uses(text: str, c: Clause, rx) -> tuple[int, int] | None:
    m = rx.search(text, c.start, c.end)
    return (m.start(), m.end()) if m else None


def _definition_flags(pairs: list[Pair], A: list[Clause], B: list[Clause], ta: str, tb: str, lang: str,
                      row_flags: list[list[RawFlag]]) -> None:
    """A definition that changed (edited, added or deleted) flags every other clause using the term."""
    changed: dict[str, str] = {}
    for p in pairs:
        if p.change == "unchanged" or (p.a is not None and p.b is not None and not p.edited):
            continue
        for c in ([A[p.a]] if p.a is not None else []) + ([B[p.b]] if p.b is not None else []):
            for t in c.defines:
                changed.setdefault(t, c.anchor)
    if not changed:
        return
    for term in sorted(changed):
        if term.casefold() in PRONOUN_TERMS:
            continue  # "You", "Your", "We": defined, but used in every clause
        rx = term_regex({term}, lang)
        if rx is None:
            continue
        for k, p in enumerate(pairs):
            c_b = B[p.b] if p.b is not None else None
            c_a = A[p.a] if p.a is not None else None
            if (c_b and term in c_b.defines) or (c_a and term in c_a.defines):
                continue
            hit_b = _uses(tb, c_b, rx) if c_b else None
            hit_a = _uses(ta, c_a, rx) if c_a else None
            if hit_a or hit_b:
                row_flags[k].append(RawFlag("definition_changed", hit_a, hit_b,
                                            f"uses “{term}”, whose definition changed ({changed[term]})", material=False))


def _words(text: str, clauses: list[Clause], lang: str) -> set[tuple[str, str]]:
    """The distinct pairs of neighbouring tokens of some clauses read in order, without their number
    labels (Chinese per character): equal sets on both sides of a split or merge mean the text was
    only laid out again (reflowed, repeated, cut differently); an added, removed or changed word
    makes a pair that the other side lacks."""
    seq = [t.norm.casefold() for c in clauses for t in body_tokens(text, c.start, c.end, _label(c), lang)
           if t.norm.isalnum()]
    return set(zip(seq, seq[1:], strict=False))


def _severity(r: AlignmentRow) -> int:
    """0, 1 or 2: where a material row ranks among the material ones (`SEVERE_KINDS` first)."""
    kinds = {f.kind for f in r.flags if f.material}
    if kinds & SEVERE_KINDS:
        return 0
    if r.change in MATERIAL_CHANGES:
        return 1
    return 2


def _summary(rows: list[AlignmentRow], titles: tuple[dict[str, str], dict[str, str]],
             reflow: set[int] | None = None) -> list[SummaryItem]:
    """One item per changed row, naming its clauses as a reader does (`titles`: anchor -> title for
    A and B): material first (by `_severity`, then in B's order), the rest after. Rows in `reflow`
    (a split or merge whose words did not change, or a later row of one) are not material for
    their change type."""
    reflow = reflow or set()
    items = []
    for k, r in enumerate(rows):
        if r.change == "unchanged" and not r.flags:
            continue
        by_change = r.change in MATERIAL_CHANGES or (r.change in {"split", "merged"} and k not in reflow)
        material = by_change or any(f.material for f in r.flags)
        kinds = sorted({f.kind for f in r.flags})
        ta = titles[0].get(r.a, r.a) if r.a is not None else "—"
        tb = titles[1].get(r.b, r.b) if r.b is not None else "—"
        text = f"{ta if ta == tb else f'{ta} → {tb}'}: {r.change}"
        if k in reflow and not any(f.material for f in r.flags):
            text += " (layout only: the same words)"
        if r.edited and r.change not in {"modified", "split", "merged"}:
            text += " and edited"
        if r.flags:
            text += "; " + "; ".join(f"{f.kind.replace('_', ' ')}: {f.detail}" for f in r.flags[:4])
            if len(r.flags) > 4:
                text += f"; +{len(r.flags) - 4} more"
        items.append(SummaryItem(row=k, a=r.a, b=r.b, change=r.change, material=material, kinds=kinds, text=text))
    items.sort(key=lambda s: (not s.material, _severity(rows[s.row]) if s.material else 0, s.row))
    return items


def compare_documents(doc_a: Document, doc_b: Document, cfg: AlignConfig | None = None,
                      input_sha256: str = "", *, llm: LLMRun | None = None,
                      llm_settings: StepSettings | None = None) -> ContractResult:
    """The whole pipeline on two documents. `llm` (a pipelines.llm.LLMRun): the LLM steps
    (`pipelines.contracts.llm_steps`: materiality, explanations, amendment summary) run as its mode
    says; None or mode off: the rules-only result, exactly."""
    la, lb = contract_language(doc_a.text), contract_language(doc_b.text)
    lang = "zh" if "zh" in (la, lb) else "en"
    sa = parse_structure(doc_a, lang, [p.char_start for p in doc_a.pages[1:]])
    sb = parse_structure(doc_b, lang, [p.char_start for p in doc_b.pages[1:]])
    result = compare_structures(doc_a, sa, doc_b, sb, cfg, input_sha256)
    if llm is not None and llm.active:
        run_llm_steps(result, llm, llm_settings)
    return result


def compare_texts(a_text: str, b_text: str, a_name: str = "a", b_name: str = "b",
                  cfg: AlignConfig | None = None, *, llm: LLMRun | None = None,
                  llm_settings: StepSettings | None = None) -> ContractResult:
    """Compare two versions given as strings."""
    doc_a = Document.from_text(a_text, doc_id=a_name, source_name=a_name)
    doc_b = Document.from_text(b_text, doc_id=b_name, source_name=b_name)
    return compare_documents(doc_a, doc_b, cfg, llm=llm, llm_settings=llm_settings)


def warm_up(cfg: AlignConfig | None = None) -> None:
    """Load what comparisons with `cfg` need before the first one runs (MiniLM when
    `cfg.semantic`; it is loaded once per process), so a long-running server pays for it up front."""
    if cfg is not None and cfg.semantic:
        minilm_model()


def apply_changes(result: ContractResult, a_text: str) -> str:
    """Version B's text rebuilt from version A's text and the reported changes alone (the round trip):
    each B clause from its row's ops (equal: A's text; anything else: the B text the op carries),
    in B's order, with the separators between clauses."""
    seps = result.documents["b"].separators
    by_b: dict[str, AlignmentRow] = {}
    for r in result.alignment:
        if r.b is not None:
            by_b.setdefault(r.b, r)
    out = []
    for k, c in enumerate(result.clauses["b"]):
        out.append(seps[k])
        row = by_b[c.anchor]
        for op in row.diff:
            if op.op == "equal":
                out.append(a_text[op.a_span.char_start:op.a_span.char_end])
            elif op.b_span is not None:
                out.append(op.b_span.text)
    out.append(seps[-1])
    return "".join(out)


class ContractsPipeline(Pipeline):
    """Contract anchor alignment: two versions, every clause aligned, every change explained."""

    name = "contracts"
    title = "Contract versions"
    version = "1.0.0"
    schema_version = SCHEMA_VERSION
    result_model = ContractResult

    def __init__(self, cfg: AlignConfig | None = None):
        self.cfg = cfg or AlignConfig()

    def discover(self, folder: Path) -> list[PipelineInput]:
        """Pairs: a `pairs.csv` manifest if present, else `X.v1.*`/`X.v2.*` files and folders with `v1.*`/`v2.*`."""
        folder = Path(folder)
        manifest = folder / "pairs.csv"
        if manifest.is_file():
            return _from_manifest(folder, manifest)
        files = [p for p in sorted(folder.rglob("*")) if is_candidate_file(p)
                 and not any(part.startswith(".") for part in p.relative_to(folder).parts)]
        pairs: dict[str, dict[str, Path]] = {}
        for p in files:
            m = re.match(r"^(.*)\.(v1|v2)$", p.stem, flags=re.I)
            if m and m.group(1):
                key = (p.parent.relative_to(folder) / m.group(1)).as_posix()
            elif p.stem.lower() in {"v1", "v2"}:
                key = p.parent.relative_to(folder).as_posix() or folder.name
                m = re.match(r"^(v1|v2)$", p.stem, flags=re.I)
            else:
                continue
            pairs.setdefault(key, {})[m.group(m.lastindex).lower()] = p
        return [PipelineInput(k, (v["v1"], v["v2"])) for k, v in sorted(pairs.items()) if "v1" in v and "v2" in v]

    def run_documents(self, docs: list[Document], input_sha256: str = "", *,
                      llm: LLMRun | None = None) -> ContractResult:
        if len(docs) != 2:
            raise ValueError(f"the contracts pipeline compares two versions; got {len(docs)} document(s)")
        return compare_documents(docs[0], docs[1], self.cfg, input_sha256, llm=llm)

    def structure_answerer(self, result: ContractResult, docs: list[Document]):
        """Questions the clause alignment answers exactly (pipelines.contracts.answers)."""
        from pipelines.contracts.answers import structure_answer

        return lambda question: structure_answer(result, docs, question)

    def summary_line(self, result: ContractResult) -> str:
        s = result.stats
        return (f"{s['clauses_a']}→{s['clauses_b']} clauses: {s['modified']} modified, {s['added']} added, "
                f"{s['deleted']} deleted, {s['moved']} moved, {s['renumbered']} renumbered, {s['material']} material")


def _from_manifest(folder: Path, manifest: Path) -> list[PipelineInput]:
    out = []
    with manifest.open(newline="", encoding="utf-8") as fh:
        for k, row in enumerate(csv.reader(fh)):
            row = [c.strip() for c in row]
            if not row or not row[0] or row[0].startswith("#"):
                continue
            if k == 0 and row[0].lower() in {"a", "v1", "old", "version_a"}:
                continue
            if len(row) < 2:
                continue
            a, b = folder / row[0], folder / row[1]
            pid = row[2] if len(row) > 2 and row[2] else f"{Path(row[0]).stem}~{Path(row[1]).stem}"
            out.append(PipelineInput(pid, (a, b)))
    return out
