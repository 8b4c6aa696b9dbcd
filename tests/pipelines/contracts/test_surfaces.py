"""The surfaces: export contract and schema, pipeline discovery and batch interface, docx and PDF input."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from pipelines.contracts import ContractResult, ContractsPipeline, compare_texts
from pipelines.registry import get_pipeline
from tests.pipelines.contracts.data import SMALL_A, SMALL_B, load_pair


def test_export_contract_shape() -> None:
    r = compare_texts(SMALL_A, SMALL_B, "a.txt", "b.txt")
    d = json.loads(r.model_dump_json())
    assert set(d) >= {"schema_version", "pipeline", "pipeline_version", "input_sha256", "documents", "clauses",
                      "alignment", "summary"}
    assert set(d["documents"]) == {"a", "b"} and set(d["clauses"]) == {"a", "b"}
    c = d["clauses"]["a"][1]
    assert {"anchor", "number", "heading", "span"} <= set(c) and c["anchor"] == "1.1"
    assert set(c["span"]) >= {"doc_id", "char_start", "char_end", "page", "text"}
    row = next(x for x in d["alignment"] if x["a"] == "1.1")
    assert {"a", "b", "change", "score", "diff", "flags"} <= set(row)
    assert row["change"] == "modified" and isinstance(row["score"], float)
    assert all({"op", "a_span", "b_span"} <= set(op) for op in row["diff"])
    kinds = {f["kind"] for f in row["flags"]}
    assert {"amount", "duration", "obligation"} <= kinds
    assert all({"kind", "a_span", "b_span", "detail"} <= set(f) for f in row["flags"])
    assert d["summary"][0]["material"] and d["summary"][0]["b"] == "1.1"
    assert ContractResult.model_validate(d) == r
    schema = ContractResult.model_json_schema()
    assert "alignment" in schema["properties"]
    from app.export import json_schema

    assert json.loads(json_schema("contracts"))["properties"]["schema_version"]


def test_registry_discover_and_batch_interface(tmp_path: Path) -> None:
    pipe = get_pipeline("contracts")
    assert isinstance(pipe, ContractsPipeline) and pipe.result_model is ContractResult
    (tmp_path / "lease.v1.txt").write_text(SMALL_A, encoding="utf-8")
    (tmp_path / "lease.v2.txt").write_text(SMALL_B, encoding="utf-8")
    (tmp_path / "lonely.v1.txt").write_text(SMALL_A, encoding="utf-8")
    sub = tmp_path / "nda"
    sub.mkdir()
    (sub / "v1.md").write_text(SMALL_A, encoding="utf-8")
    (sub / "v2.md").write_text(SMALL_B, encoding="utf-8")
    (tmp_path / "PROVENANCE.md").write_text("notes", encoding="utf-8")
    found = {i.input_id: [p.name for p in i.paths] for i in pipe.discover(tmp_path)}
    assert found == {"lease": ["lease.v1.txt", "lease.v2.txt"], "nda": ["v1.md", "v2.md"]}
    inp = next(i for i in pipe.discover(tmp_path) if i.input_id == "lease")
    r = pipe.run_input(inp)
    assert r.input_sha256 == inp.content_sha256() and r.stats["modified"] == 1
    assert "modified" in pipe.summary_line(r)
    (tmp_path / "pairs.csv").write_text("a,b,id\nlease.v1.txt,nda/v2.md,mixed\n", encoding="utf-8")
    assert [(i.input_id, [p.name for p in i.paths]) for i in pipe.discover(tmp_path)] == [("mixed", ["lease.v1.txt", "v2.md"])]
    samples = Path(__file__).resolve().parents[3] / "data" / "samples" / "contracts"
    assert len(pipe.discover(samples)) == 4


def test_docx_input_against_text() -> None:
    import docx

    from pipelines.contracts.pipeline import compare_documents
    from pipelines.documents import load_bytes

    a, b, _ = load_pair("zh-interpretation-personal-injury-2020-to-2022")

    def as_docx(text: str) -> bytes:
        d = docx.Document()
        for para in text.split("\n\n"):
            if para.strip():
                d.add_paragraph(para.strip())
        buf = io.BytesIO()
        d.save(buf)
        return buf.getvalue()

    da = load_bytes(as_docx(a), "v1.docx")
    db = load_bytes(b.encode("utf-8"), "v2.txt")
    r = compare_documents(da, db)
    edited = {x.a for x in r.alignment if x.edited and x.a and x.a.startswith("第")}
    assert {"第十二条", "第二十四条"} <= edited and "第一条" not in edited
    for c in r.clauses["a"]:
        assert da.text[c.span.char_start:c.span.char_end] == c.span.text


def test_pdf_with_wrapped_lines_and_page_breaks(tmp_path: Path) -> None:
    """Version A as a PDF (lines wrapped at 95 characters, 11 pages, running header, page numbers),
    version B as text: the same single change is found, and spans carry pages and boxes."""
    import textwrap

    pytest.importorskip("reportlab")
    from pipelines.contracts.pipeline import compare_documents
    from pipelines.documents import Document, load_document
    from tests.pdfgen import make_pdf

    a, b, _ = load_pair("en-commonpaper-csa-1.0-to-1.1")
    lines: list[str] = []
    for para in a.split("\n\n"):
        lines += textwrap.wrap(para, 95) + [""]
    make_pdf(tmp_path / "v1.pdf", [lines[i:i + 50] for i in range(0, len(lines), 50)], header="Standard Terms",
             footer_page_numbers=True)
    da = load_document(tmp_path / "v1.pdf")
    assert len(da.pages) > 5
    r = compare_documents(da, Document.from_text(b, doc_id="b"))
    assert [(x.a, x.b, x.change) for x in r.alignment if x.change != "unchanged"] == [("12.3", "12.3", "modified")]
    c = next(c for c in r.clauses["a"] if c.anchor == "14.16")
    assert c.span.page > 5 and c.span.bbox is not None
    assert da.text[c.span.char_start:c.span.char_end] == c.span.text
