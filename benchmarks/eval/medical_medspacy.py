"""medspaCy against longdoc's own rules (issue 19: "measure both and keep the better one").

medspaCy is not a project dependency. Install it in a scratch venv outside the repository and point
this script at that interpreter; the script runs longdoc here and medspaCy there (this file, run by
that interpreter with --worker, is the only place medspacy is imported):

    python3 -m venv /tmp/msvenv && /tmp/msvenv/bin/pip install medspacy==1.3.1
    python -m benchmarks.eval.medical_medspacy --medspacy-python /tmp/msvenv/bin/python [--json] [--show]

(a) Assertion status (negated / possible / historical / family / hypothetical / present) for the
    pipeline's own entity spans: longdoc's `context` rules as the pipeline assigns them, against
    medspaCy ConText with its default rules on exactly the same spans (the spans are set as the
    spaCy doc's ents; sentences by PyRuSH, medspaCy's default sentence splitter), alone and with the
    medspaCy Sectionizer's default section attributes (past history -> historical, family history
    -> family, ...). Precedence when several attributes are set, as in longdoc: negated > family >
    hypothetical > possible (is_uncertain) > historical. Truth sets, English only (medspaCy's
    rules are English):
    - synthea: the six development patients' conditions (template slot "presenting" -> present,
      "history of" -> historical), on the pipeline entity with the truth span;
    - heldout: the 25 English sentences of tests/fixtures/medical/heldout/assertions.tsv;
    - unseen: the problems with an assertion in tests/fixtures/medical/unseen-curated/truth.json
      (hand annotated), on the pipeline entities overlapping them.
(b) Section detection: longdoc's `sections.find_sections` against the medspaCy Sectionizer (default
    rules) on the English notes (Synthea, curated-no-truth, unseen-curated, en-appendectomy). The
    headers present are found mechanically from the typography: a Markdown heading line, or an
    ALL-CAPS label at a line start followed by a colon or alone on its line. A header is found
    when a section title of the system overlaps its label; a title overlapping no header counts
    against precision.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FIX = ROOT / "tests" / "fixtures" / "medical"
PRECEDENCE = [("is_negated", "negated"), ("is_family", "family"), ("is_hypothetical", "hypothetical"),
              ("is_uncertain", "possible"), ("is_historical", "historical")]

_MD_HEAD = re.compile(r"^#{1,6}[ \t]*(\S[^\n]*?)[ \t]*$", re.M)
_CAPS_HEAD = re.compile(r"^[ \t]*([A-Z0-9][A-Z0-9 &/,()'\-]*[A-Z)])[ \t]*(?::|[ \t]*$)", re.M)


def headers(text: str) -> list[tuple[int, int, str]]:
    """The headers present in a note, by typography: (start, end, label)."""
    out = {m.start(1): (m.start(1), m.end(1), m.group(1)) for m in _MD_HEAD.finditer(text)}
    for m in _CAPS_HEAD.finditer(text):
        label = m.group(1)
        if len(re.findall(r"[A-Z]", label)) >= 3 and len(label.split()) <= 6:
            out.setdefault(m.start(1), (m.start(1), m.end(1), label))
    return [out[k] for k in sorted(out)]


# --------------------------------------------------------------------------- medspaCy side (scratch venv)
def _worker() -> None:
    """Read {"docs": [{"text", "spans": [[s, e], ...]}]} on stdin; write, per doc, the ConText
    assertion of each span (alone and with the Sectionizer's attributes) and the section titles."""
    import time

    t0 = time.perf_counter()
    try:
        from loguru import logger  # PyRuSH logs every token at DEBUG

        logger.remove()
    except ImportError:
        pass
    import medspacy  # noqa: F401 - registers the components
    import spacy

    nlp = spacy.blank("en")
    nlp.add_pipe("medspacy_pyrush")
    ctx_only = spacy.blank("en").add_pipe("medspacy_context")
    ctx = nlp.add_pipe("medspacy_context")
    sec = nlp.add_pipe("medspacy_sectionizer")  # default rules, default span attributes
    load_s = time.perf_counter() - t0
    req = json.load(sys.stdin)
    out = []
    t1 = time.perf_counter()
    for d in req["docs"]:
        text = d["text"]
        doc = nlp.get_pipe("medspacy_pyrush")(nlp.make_doc(text))
        ents = []
        for s, e in d["spans"]:
            sp = doc.char_span(s, e, label="TARGET", alignment_mode="expand")
            ents.append(sp)
        keep = []
        for sp in sorted((x for x in ents if x is not None), key=lambda x: (x.start, -x.end)):
            if not keep or sp.start >= keep[-1].end:
                keep.append(sp)
        doc.ents = keep

        def status(span) -> str:
            for attr, name in PRECEDENCE:
                if getattr(span._, attr):
                    return name
            return "present"

        doc = ctx_only(doc)
        alone = {(x.start_char, x.end_char): status(x) for x in doc.ents}
        for x in doc.ents:  # reset before the second run
            for attr, _ in PRECEDENCE:
                setattr(x._, attr, False)
        doc = sec(ctx(doc))
        both = {(x.start_char, x.end_char): status(x) for x in doc.ents}

        def lookup(table, s, e, doc=doc):
            sp = doc.char_span(s, e, alignment_mode="expand")
            if sp is None:
                return None
            for (a, b), v in table.items():
                if a < sp.end_char and sp.start_char < b:
                    return v
            return None

        out.append({"context": [lookup(alone, s, e) for s, e in d["spans"]],
                    "context_sections": [lookup(both, s, e) for s, e in d["spans"]],
                    "sections": [[doc[s.title_start:s.title_end].start_char, doc[s.title_start:s.title_end].end_char,
                                  s.category] for s in doc._.sections if s.title_end > s.title_start]})
    import medspacy as _m

    json.dump({"docs": out, "load_s": round(load_s, 2), "run_s": round(time.perf_counter() - t1, 2),
               "version": _m.__version__, "spacy": spacy.__version__,
               "context_rules": len(ctx.rules), "section_rules": len(sec.rules)}, sys.stdout)


# --------------------------------------------------------------------------- longdoc side
def _assertion_cases():
    """(set name, Document, [(span, expected, longdoc assertion)]) for the three truth sets."""
    from benchmarks.eval.medical_evaluate import synthea_patients
    from pipelines.documents import Document, load_document
    from pipelines.medical import MedicalPipeline
    from pipelines.medical.entities import extract
    from pipelines.medical.sections import find_sections

    pipe = MedicalPipeline(use_embeddings=False)
    for folder in synthea_patients():
        truth = json.loads((folder / "truth.json").read_text(encoding="utf-8"))
        result = pipe.run_input(pipe.discover(folder)[0])
        by_span = {(e.doc_id, e.span.char_start, e.span.char_end): e for e in result.entities}
        per_doc: dict[str, list] = {}
        for t in truth["entities"]:
            if t["type"] not in ("presenting", "history"):
                continue
            name = t["doc"].split("/")[-1]
            e = by_span.get((name, t["start"], t["end"]))
            if e is None:
                continue
            per_doc.setdefault(name, []).append(((t["start"], t["end"]),
                                                 "historical" if t["type"] == "history" else "present", e.assertion))
        for name, cases in per_doc.items():
            doc = load_document(folder / "notes" / name)
            # every pipeline entity of the note is a target, so ConText sees the same spans as longdoc
            others = [(e.span.char_start, e.span.char_end) for e in result.entities if e.doc_id == name]
            yield "synthea", doc, cases, others
    for line in (FIX / "heldout" / "assertions.tsv").read_text(encoding="utf-8").splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        sentence, term, expected = line.split("\t")
        if not sentence.isascii():
            continue
        doc = Document.from_text(sentence)
        s = sentence.index(term)
        ms = [m for m in extract(doc, find_sections(doc)) if m.start < s + len(term) and s < m.end]
        if ms:
            yield "heldout", doc, [((ms[0].start, ms[0].end), expected, ms[0].assertion)], \
                [(m.start, m.end) for m in extract(doc, find_sections(doc))]
        else:
            yield "heldout", doc, [((s, s + len(term)), expected, None)], [(s, s + len(term))]
    unseen = FIX / "unseen-curated"
    truth = json.loads((unseen / "truth.json").read_text(encoding="utf-8"))
    for d in truth["documents"]:
        doc = load_document(unseen / d["file"])
        result = pipe.run_documents([doc])
        ents = [e for e in result.entities if e.type in ("problem", "symptom")]
        cases = []
        for t in d["entities"]:
            if t["type"] != "problem" or not t.get("assertion"):
                continue
            hit = next((e for e in ents if e.span.char_start < t["end"] and t["start"] < e.span.char_end), None)
            if hit is not None:
                cases.append(((hit.span.char_start, hit.span.char_end), t["assertion"], hit.assertion))
        yield "unseen", doc, cases, [(e.span.char_start, e.span.char_end) for e in result.entities]


def _section_docs():
    from benchmarks.eval.medical_evaluate import synthea_patients
    from pipelines.documents import load_document

    groups = {"synthea": [p for f in synthea_patients() for p in sorted((f / "notes").glob("*.txt"))],
              "curated-no-truth": sorted((FIX / "curated-no-truth").glob("*.txt")),
              "unseen-curated": sorted((FIX / "unseen-curated" / "notes").glob("*.txt")),
              "en-appendectomy": sorted((FIX / "en-appendectomy").glob("*.txt"))}
    for g, paths in groups.items():
        for p in paths:
            yield g, load_document(p)


def run(medspacy_python: str) -> dict:
    import time

    from pipelines.medical.sections import find_sections

    cases = list(_assertion_cases())
    secdocs = list(_section_docs())
    t0 = time.perf_counter()
    for _, doc in secdocs:
        find_sections(doc)
    longdoc_sections_s = time.perf_counter() - t0
    req = {"docs": [{"text": doc.text, "spans": [list(s) for s in others]} for _, doc, _, others in cases] +
                   [{"text": doc.text, "spans": []} for _, doc in secdocs]}
    proc = subprocess.run([medspacy_python, str(Path(__file__).resolve()), "--worker"], input=json.dumps(req),
                          capture_output=True, text=True, check=True)
    got = json.loads(proc.stdout)
    res_docs = got["docs"]
    # (a) assertions
    table: dict = {}
    confusions: list = []
    for i, (name, doc, cs, others) in enumerate(cases):
        r = res_docs[i]
        idx = {tuple(s): j for j, s in enumerate(others)}
        for span, expected, ours in cs:
            j = idx.get(tuple(span))
            ctx = r["context"][j] if j is not None else None
            ctx_sec = r["context_sections"][j] if j is not None else None
            row = table.setdefault(name, {"n": 0, "longdoc": 0, "medspacy_context": 0, "medspacy_context_sections": 0})
            row["n"] += 1
            row["longdoc"] += ours == expected
            row["medspacy_context"] += ctx == expected
            row["medspacy_context_sections"] += ctx_sec == expected
            if ours != expected or ctx_sec != expected:
                confusions.append({"set": name, "text": doc.text[span[0]:span[1]], "expected": expected,
                                   "longdoc": ours, "medspacy_context": ctx, "medspacy_context_sections": ctx_sec})
    total = {"n": 0, "longdoc": 0, "medspacy_context": 0, "medspacy_context_sections": 0}
    for row in table.values():
        for k in total:
            total[k] += row[k]
    table["all"] = total
    # (b) sections
    sec: dict = {}
    off = len(cases)
    for k, (g, doc) in enumerate(secdocs):
        heads = headers(doc.text)
        ours = [(s.start, s.end) for s in find_sections(doc)]
        theirs = [(a, b) for a, b, _ in res_docs[off + k]["sections"]]
        row = sec.setdefault(g, {"documents": 0, "headers": 0, "longdoc_found": 0, "medspacy_found": 0,
                                 "longdoc_titles": 0, "longdoc_wrong": 0, "medspacy_titles": 0, "medspacy_wrong": 0})
        row["documents"] += 1
        row["headers"] += len(heads)
        for a, b, _ in heads:
            row["longdoc_found"] += any(x < b and a < y for x, y in ours)
            row["medspacy_found"] += any(x < b and a < y for x, y in theirs)
        for sysname, titles in (("longdoc", ours), ("medspacy", theirs)):
            row[f"{sysname}_titles"] += len(titles)
            row[f"{sysname}_wrong"] += sum(not any(x < b and a < y for a, b, _ in heads) for x, y in titles)
    all_row = {k: sum(r[k] for r in sec.values()) for k in next(iter(sec.values()))}
    sec["all"] = all_row
    for row in sec.values():
        for sysname in ("longdoc", "medspacy"):
            row[f"{sysname}_recall"] = round(row[f"{sysname}_found"] / row["headers"], 3) if row["headers"] else None
            row[f"{sysname}_precision"] = (round(1 - row[f"{sysname}_wrong"] / row[f"{sysname}_titles"], 3)
                                           if row[f"{sysname}_titles"] else None)
    return {"assertion": table, "assertion_disagreements": confusions, "sections": sec,
            "medspacy": {k: got[k] for k in ("version", "spacy", "context_rules", "section_rules", "load_s", "run_s")},
            "longdoc_sections_s": round(longdoc_sections_s, 2)}


if __name__ == "__main__":
    if "--worker" in sys.argv:
        _worker()
        sys.exit(0)
    py = sys.argv[sys.argv.index("--medspacy-python") + 1] if "--medspacy-python" in sys.argv else sys.executable
    res = run(py)
    if "--show" not in sys.argv:
        res.pop("assertion_disagreements")
    print(json.dumps(res, indent=1, ensure_ascii=False))
