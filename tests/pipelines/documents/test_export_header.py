"""One header and one document block for every pipeline's export, and one input hash.

Each of the four pipelines runs over a small input written to disk (the batch runner's path:
`run_input`); the export carries the ResultBase header built from the pipeline's class attributes
and, for each analysed document, the same `DocumentInfo` block (`document` in a pipeline that
takes one document, `documents` in one that takes several).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from app.export import json_schema, load_result, to_json
from pipelines.base import PipelineInput
from pipelines.contracts.pipeline import ContractsPipeline
from pipelines.documents import Document, DocumentInfo, input_sha256, load_document
from pipelines.medical.pipeline import MedicalPipeline
from pipelines.patents.pipeline import PatentsPipeline
from pipelines.registry import available, get_pipeline
from pipelines.reports.pipeline import ReportsPipeline

FILES = {
    "patents": {"claims.txt": "What is claimed is:\n1. A widget comprising a base and a lid.\n"
                              "2. The widget of claim 1, wherein the lid is round.\n"},
    "reports": {"report.txt": "1 Introduction\nSales rose, as Figure 1 shows.\n\nFigure 1: Sales by year.\n"},
    "contracts": {"deal.v1.txt": "1. Term. This agreement lasts one year.\n\n2. Fees. The fee is $100.\n",
                  "deal.v2.txt": "1. Term. This agreement lasts two years.\n\n2. Fees. The fee is $100.\n"},
    "medical": {"admission_note.txt": "Admission Note\nDate: 2024-03-01\nHPI: fever and cough for 2 days.\n",
                "discharge_summary.txt": "Discharge Summary\nDate: 2024-03-05\nDiagnosis: pneumonia.\n"},
}
PIPELINES = {"patents": PatentsPipeline, "reports": ReportsPipeline, "contracts": ContractsPipeline,
             "medical": lambda: MedicalPipeline(use_embeddings=False)}
SINGLE = {"patents", "reports"}


def _run(name: str, tmp_path: Path):
    folder = tmp_path / name
    folder.mkdir()
    paths = []
    for fname, text in FILES[name].items():
        (folder / fname).write_text(text, encoding="utf-8")
        paths.append(folder / fname)
    pipe = PIPELINES[name]()
    inp = PipelineInput(name, tuple(paths))
    return pipe, inp, pipe.run_input(inp)


def _document_blocks(name: str, data: dict) -> list[dict]:
    """The DocumentInfo block of every analysed document in an export."""
    if name in SINGLE:
        return [data["document"]]
    if name == "contracts":
        return [data["documents"][k]["info"] for k in ("a", "b")]
    return [d["info"] for d in data["documents"]]


@pytest.mark.parametrize("name", sorted(FILES))
def test_every_export_carries_the_header_and_one_document_block(name, tmp_path):
    pipe, inp, result = _run(name, tmp_path)
    data = json.loads(to_json(result))
    assert list(data)[:4] == ["schema_version", "pipeline", "pipeline_version", "input_sha256"]
    assert (data["schema_version"], data["pipeline"], data["pipeline_version"]) == (
        pipe.schema_version, pipe.name, pipe.version)
    assert data["input_sha256"] == inp.content_sha256()
    # singular for a one-document pipeline, plural for one that takes several
    assert ("document" in data, "documents" in data) == ((True, False) if name in SINGLE else (False, True))
    blocks = _document_blocks(name, data)
    docs = [load_document(p) for p in inp.paths]
    assert len(blocks) == len(docs)
    for block in blocks:
        assert list(block) == list(DocumentInfo.model_fields)
        doc = next(d for d in docs if d.doc_id == block["doc_id"])
        assert block == doc.info().model_dump()
    assert load_result(name, to_json(result)) == result


def test_the_document_block_has_one_shape_across_pipelines(tmp_path):
    shapes = set()
    for name in sorted(FILES):
        _, _, result = _run(name, tmp_path)
        for block in _document_blocks(name, json.loads(to_json(result))):
            shapes.add(tuple((k, type(v).__name__) for k, v in block.items() if v is not None))
    assert len(shapes) == 1


def test_schema_versions_are_named_after_their_pipeline():
    for name in available():
        pipe = get_pipeline(name)
        assert re.fullmatch(rf"{pipe.name}/\d+\.\d+", pipe.schema_version), pipe.schema_version
        schema = json.loads(json_schema(name))
        assert {"schema_version", "pipeline", "pipeline_version", "input_sha256"} <= set(schema["required"])
        assert "DocumentInfo" in schema["$defs"]


def test_input_sha256_is_the_same_before_and_after_ingest(tmp_path):
    a, b = tmp_path / "b.txt", tmp_path / "a.md"
    a.write_text("version one\n", encoding="utf-8")
    b.write_bytes("第二份\n".encode("utf-16"))
    docs = [load_document(a), load_document(b)]
    h = input_sha256([a, b])
    assert len(h) == 64 and h == input_sha256(docs) == PipelineInput("x", (a, b)).content_sha256()
    assert input_sha256([b, a]) == h  # the order the files are given in does not count
    a.write_text("version two\n", encoding="utf-8")
    assert input_sha256([a, b]) != h  # the bytes count
    c = tmp_path / "c.txt"
    c.write_text("version one\n", encoding="utf-8")
    assert input_sha256([c, b]) != h  # and the names


def test_input_sha256_of_a_pasted_text_hashes_its_text():
    doc = Document.from_text("pasted claims", doc_id="pasted")
    same = Document.from_text("pasted claims", doc_id="pasted")
    other = Document.from_text("pasted claim", doc_id="pasted")
    assert input_sha256([doc]) == input_sha256([same]) != input_sha256([other])
    assert PatentsPipeline().run_documents([doc]).input_sha256 == input_sha256([doc])
