"""The export: the span invariant for every span, determinism (byte-identical JSON), round-trip
through the pydantic models, PDF input with page and bbox, the Pipeline class, the graph and the trees."""

from __future__ import annotations

import json

import networkx as nx
import pytest

from pipelines.documents import Document, load_document
from pipelines.patents.model import PatentResult
from pipelines.patents.pipeline import (
    PatentsPipeline,
    analyse_document,
    analyse_text,
    build_graph,
)
from pipelines.patents.tree import MAX_DEPTH
from pipelines.registry import get_pipeline
from tests.pipelines.patents.helpers import CORPUS_IDS, SAMPLES, iter_spans, load_text, load_truth

ADVERSARIAL = (
    "US 7,000,000 B2\nWhat is claimed is:\n1. (Original) A device comprising:\n(a) a housing (10);\n(b) a lid.\n"
    "2. (Canceled)\n3-4. (Canceled)\n5. The device of claims 1 and 2, wherein the hinge is red.\n- 2 -\n"
    "6. The device of any one of claims 1 to 9, wherein x.\n7. The device of claim 7 or 6.\n"
    "８．根据权利要求１所述的装置，其特征在于，所述电机为直流电机。\n"
)


def _check_spans(result: PatentResult, doc_text: str) -> int:
    n = 0
    for s in iter_spans(result):
        assert doc_text[s.char_start : s.char_end] == s.text
        assert s.doc_id == result.document.doc_id
        n += 1
    return n


@pytest.mark.parametrize("patent_id", CORPUS_IDS)
def test_span_invariant_corpus(patent_id):
    text = load_text(patent_id)
    result = analyse_text(text, doc_id=patent_id)
    assert _check_spans(result, text) > len(result.claims) * 2
    for c in result.claims:
        assert c.span.text.startswith(str(c.number))
        for part in (c.preamble, c.transition, *c.elements, *[r.span for r in c.references]):
            if part is not None:
                assert c.span.char_start <= part.char_start <= part.char_end <= c.span.char_end


def test_span_invariant_adversarial():
    result = analyse_text(ADVERSARIAL)
    assert _check_spans(result, ADVERSARIAL) > 10
    assert {f.code for f in result.findings} >= {"conjunctive_multiple_dependency", "reference_to_cancelled",
                                                 "missing_reference", "forward_reference", "self_reference"}


@pytest.mark.parametrize("text_id", ["US6981466", "CN110326254A", None])
def test_deterministic_json(text_id):
    text = load_text(text_id) if text_id else ADVERSARIAL
    a = analyse_text(text).model_dump_json(indent=2)
    b = analyse_text(text).model_dump_json(indent=2)
    assert a == b
    assert "time" not in json.loads(a)  # no timestamps
    pipe = PatentsPipeline()
    doc1, doc2 = Document.from_text(text, doc_id="x"), Document.from_text(text, doc_id="x")
    assert pipe.run_documents([doc1], "abc").model_dump_json() == pipe.run_documents([doc2], "abc").model_dump_json()


@pytest.mark.parametrize("text_id", ["US7643973", "CN116327231A", None])
def test_round_trip(text_id):
    text = load_text(text_id) if text_id else ADVERSARIAL
    result = analyse_text(text)
    again = PatentResult.model_validate_json(result.model_dump_json())
    assert again == result
    assert again.model_dump_json() == result.model_dump_json()


def test_deep_chain_round_trips():
    n = MAX_DEPTH * 3 + 7
    text = "1. A lid.\n" + "".join(f"{i}. The lid of claim {i - 1}, wherein x.\n" for i in range(2, n + 1))
    result = analyse_text(text)
    assert result.stats.max_depth == n - 1
    assert PatentResult.model_validate_json(result.model_dump_json()) == result
    assert [t.continuation for t in result.trees] == [False, True, True, True]
    seen = []

    def walk(t):
        seen.append(t.number)
        for k in t.children:
            walk(k)

    for t in result.trees:
        walk(t)
    assert sorted(set(seen)) == list(range(1, n + 1))


def test_dense_any_preceding_claims_stay_small():
    text = "1. A lid.\n" + "".join(f"{i}. The lid of any preceding claim, wherein x.\n" for i in range(2, 61))
    result = analyse_text(text)
    assert len(result.model_dump_json()) < 2_000_000
    assert result.claims[-1].depends_on == list(range(1, 60))


@pytest.mark.parametrize(("pdf", "truth_id"), [("US6836979_claims.pdf", "US6836979"),
                                               ("CN110326254A_claims.pdf", "CN110326254A")])
def test_pdf_input(pdf, truth_id):
    doc = load_document(SAMPLES / pdf)
    assert len(doc.pages) >= 2
    result = analyse_document(doc)
    truth = load_truth(truth_id)
    assert {c.number: c.depends_on for c in result.claims} == {c["number"]: c["depends_on"] for c in truth["claims"]}
    assert _check_spans(result, doc.text) > 0
    pages = {c.span.page for c in result.claims}
    assert len(pages) >= 2
    for s in iter_spans(result):
        if s.text.strip():
            assert s.bbox is not None and s.page >= 1
    for c in result.claims:
        assert "Page " not in c.text and "Page " not in c.span.text  # the footer is not claim text


def test_pdf_claim_over_page_break_keeps_its_text():
    doc = load_document(SAMPLES / "US6836979_claims.pdf")
    result = analyse_document(doc)
    straddling = [c for c in result.claims if doc.page_of(c.span.char_start) != doc.page_of(c.span.char_end - 1)]
    for c in straddling:
        assert c.text.rstrip().endswith(".")
        assert "US 6,836,979" not in c.text


def test_pipeline_class_and_registry(tmp_path):
    pipe = get_pipeline("patents")
    assert isinstance(pipe, PatentsPipeline)
    assert pipe.name == "patents" and pipe.result_model is PatentResult and pipe.schema_version
    inputs = pipe.discover(SAMPLES)
    names = [i.input_id for i in inputs]
    assert "US6836979.txt" in names and "US6836979_claims.pdf" in names and "PROVENANCE.md" not in names
    inp = next(i for i in inputs if i.input_id == "US7156074.txt")
    result = pipe.run_input(inp)
    assert result.input_sha256 == inp.content_sha256()
    assert result.schema_version == pipe.schema_version and result.pipeline == "patents"
    line = pipe.summary_line(result)
    assert line.startswith("5 claims (1 independent)")
    with pytest.raises(ValueError):
        pipe.run_documents([])
    schema = PatentResult.model_json_schema()
    assert "claims" in schema["properties"] and "TreeNode" in json.dumps(schema)


def test_graph_and_trees():
    result = analyse_text(load_text("US7156074"))
    g = build_graph(result.claims)
    assert isinstance(g, nx.DiGraph) and nx.is_directed_acyclic_graph(g)
    assert sorted(g.edges) == [(1, 2), (1, 4), (2, 3), (2, 5), (3, 5), (4, 5)]
    (tree,) = result.trees
    assert tree.number == 1 and [k.number for k in tree.children] == [2, 4]
    five = [k for k in tree.children[0].children if k.number == 5]
    assert five and not five[0].repeat  # first appearance spelled out


def test_deterministic_across_processes(tmp_path):
    """Byte-identical JSON from two interpreters with different string-hash seeds (no set order
    leaks into the export)."""
    import os
    import subprocess
    import sys

    from tests.pipelines.patents.helpers import FIXTURES, ROOT

    sample = tmp_path / "claims.txt"
    sample.write_text(ADVERSARIAL + "\n" + load_text("US6836979"), encoding="utf-8")
    code = (
        "import sys; from pipelines.patents.pipeline import analyse_text; "
        "sys.stdout.write(analyse_text(open(sys.argv[1], encoding='utf-8').read()).model_dump_json())"
    )
    outs = []
    for seed in ("1", "12345"):
        env = dict(os.environ, PYTHONHASHSEED=seed, PYTHONPATH=str(ROOT))
        run = subprocess.run([sys.executable, "-c", code, str(sample)], capture_output=True, env=env, cwd=ROOT, check=True)
        outs.append(run.stdout)
    assert outs[0] == outs[1] and len(outs[0]) > 1000
    assert FIXTURES.exists()


def test_pdf_samples_are_reproducible(tmp_path):
    """The committed PDF samples are exactly what make_pdf_sample.py writes (reportlab invariant mode)."""
    import importlib.util

    pytest.importorskip("reportlab")
    spec = importlib.util.spec_from_file_location("make_pdf_sample", SAMPLES / "make_pdf_sample.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.main_into(tmp_path) == 2
    for pdf in ("US6836979_claims.pdf", "CN110326254A_claims.pdf"):
        assert (tmp_path / pdf).read_bytes() == (SAMPLES / pdf).read_bytes()


def test_longest_possible_chain_and_forward_cycle_do_not_recurse_too_deep():
    chain = "1. A lid.\n" + "".join(f"{i}. The lid of claim {i - 1}, wherein x.\n" for i in range(2, 1000))
    result = analyse_text(chain)
    assert result.stats.max_depth == 998 and len(result.trees) == 1 + 998 // MAX_DEPTH
    assert PatentResult.model_validate_json(result.model_dump_json()) == result
    loop = "1. A lid.\n" + "".join(f"{i}. The lid of claim {i - 1} or {i + 1}, wherein x.\n" for i in range(2, 1000))
    result = analyse_text(loop)
    assert "cycle" in result.stats.findings_by_code and not result.stats.is_dag


def _colon_claim(n: int, word: str = "widget") -> str:
    """A claim whose every element ends in a colon: each would hold the rest (a run of colon lines,
    as in description text swept into the last claim), ~`n` x 120 characters."""
    lines = ["What is claimed is:", "1. An apparatus comprising:"]
    lines += [f"  a {word} number {i} mounted on the frame by a bracket of the kind described above, which holds:"
              for i in range(n)]
    return "\n".join(lines) + "\n  a last bolt.\n"


def _part_depth(parts) -> int:
    depth, stack = 0, [(p, 1) for p in parts]
    while stack:
        p, d = stack.pop()
        depth = max(depth, d)
        stack += [(q, d + 1) for q in p.parts]
    return depth


def _preorder(parts) -> list[tuple[int, int]]:
    out, stack = [], list(reversed(parts))
    while stack:
        p = stack.pop()
        out.append((p.span.char_start, p.span.char_end))
        stack += reversed(p.parts)
    return out


def test_deeply_nested_elements_export_with_bounded_depth():
    """A 245K-character claim of 2,500 colon-ended elements: the export serialises (it raised
    PydanticSerializationError 'Maximum serialization depth exceeded' from 255 levels), round-trips,
    and keeps every element once, in order, nested at most MAX_PART_DEPTH deep."""
    from pipelines.patents.structure import MAX_PART_DEPTH

    text = _colon_claim(2500)
    assert len(text) > 245_000
    result = analyse_text(text)
    (claim,) = result.claims
    assert len(claim.elements) == 2501
    assert _part_depth(claim.parts) == MAX_PART_DEPTH
    assert _preorder(claim.parts) == [(e.char_start, e.char_end) for e in claim.elements]
    exported = result.model_dump_json()
    assert PatentResult.model_validate_json(exported) == result
    assert json.loads(exported)["claims"][0]["elements"][-1]["text"] == "a last bolt"


def test_nesting_below_the_cap_is_the_uncapped_nesting_flattened(monkeypatch):
    """Groups opened below MAX_PART_DEPTH put their elements at that depth in their order, and the
    "and" that closes such a group closes it, not a group above it: the structure down to the cap
    is the uncapped one."""
    from pipelines.patents import structure
    from pipelines.patents.structure import MAX_PART_DEPTH, Part, nest_elements

    # 24 levels opened, then closed one by one with "; and ..." elements, then two flat elements
    items = [f"element {i} comprising" for i in range(24)]
    text = "".join(f"{t}:\n" for t in items) + "".join(f"leaf {i}; and\n" for i in range(24)) + "tail a;\ntail b"
    elements, pos = [], 0
    for piece in [*items, *(f"leaf {i}" for i in range(24)), "tail a", "tail b"]:
        start = text.index(piece, pos)
        elements.append((start, start + len(piece)))
        pos = start + len(piece)

    def flatten(parts: list[Part], depth: int = 1) -> list:
        out = []
        for p in parts:
            if depth < MAX_PART_DEPTH:
                out.append(((p.start, p.end), flatten(p.parts, depth + 1)))
            else:
                out.append(((p.start, p.end), []))
                stack = list(reversed(p.parts))
                while stack:  # the subtree below the cap, in order, as siblings
                    q = stack.pop()
                    out.append(((q.start, q.end), []))
                    stack += reversed(q.parts)
        return out

    def shape(parts: list[Part]) -> list:
        return [((p.start, p.end), shape(p.parts)) for p in parts]

    capped = nest_elements(text, elements)
    monkeypatch.setattr(structure, "MAX_PART_DEPTH", 1000)
    uncapped = nest_elements(text, elements)

    def depth(parts: list[Part]) -> int:
        return 0 if not parts else 1 + max(depth(p.parts) for p in parts)

    assert depth(uncapped) == 25 and depth(capped) == MAX_PART_DEPTH
    assert shape(capped) == flatten(uncapped)
    assert [p.start for p in capped] == [elements[0][0], elements[-1][0]]  # every group closed: the last back on top
