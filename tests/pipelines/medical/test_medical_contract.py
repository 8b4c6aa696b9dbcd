"""The export contract: every span points at its exact text, the JSON is deterministic and
round-trips, the schema is printable, inputs are discovered one patient per folder."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from app.export import json_schema, load_result, to_json
from pipelines.base import PipelineInput
from pipelines.documents import SourceSpan, load_document
from pipelines.medical.models import MedicalResult
from pipelines.medical.pipeline import MedicalPipeline
from pipelines.registry import get_pipeline

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "medical"
PATIENTS = ["en-appendectomy", "zh-cholecystitis", "synthea-13d7f763", "curated-no-truth"]


def _spans(obj):
    """Every SourceSpan anywhere inside a result."""
    if isinstance(obj, SourceSpan):
        yield obj
    elif isinstance(obj, list | tuple):
        for x in obj:
            yield from _spans(x)
    elif isinstance(obj, dict):
        for x in obj.values():
            yield from _spans(x)
    elif hasattr(obj, "__pydantic_fields__"):
        for name in type(obj).model_fields:
            yield from _spans(getattr(obj, name))


@pytest.fixture(scope="module", params=PATIENTS)
def run(request):
    pipe = MedicalPipeline(use_embeddings=False)
    # every document of the folder in one analysis (curated-no-truth: five patients, so identity conflicts too)
    inp = PipelineInput(request.param, tuple(p for i in pipe.discover(FIX / request.param) for p in i.paths))
    docs = pipe.load(inp)
    result = pipe.run_documents(docs, inp.content_sha256(), question="fever and infection after surgery")
    return result, {d.doc_id: d for d in docs}, pipe, inp


def test_every_span_is_exact(run):
    result, docs, _, _ = run
    spans = list(_spans(result))
    assert len(spans) > 20
    for s in spans:
        assert docs[s.doc_id].text[s.char_start:s.char_end] == s.text, s
    for e in result.entities:
        assert e.span.text == e.text and e.doc_id == e.span.doc_id


def test_ids_and_references_are_consistent(run):
    result, _, _, _ = run
    ents = {e.id for e in result.entities}
    evs = {e.id for e in result.events}
    assert len(ents) == len(result.entities) and len(evs) == len(result.events)
    mentioned = [m for ev in result.events for m in ev.mentions]
    assert sorted(mentioned, key=lambda x: int(x[1:])) == sorted(ents, key=lambda x: int(x[1:]))  # each entity in one event
    assert all(r.a in evs and r.b in evs and r.type in ("before", "overlap") for r in result.relations)
    assert all(set(c.entities) <= ents for c in result.conflicts)
    assert all(e.assertion in ("present", "negated", "possible", "historical", "family", "hypothetical") for e in result.entities)
    for ev in result.evidence:
        assert all(it.score > 0 for it in ev.supporting + ev.contradicting)
        assert [it.score for it in ev.supporting] == sorted((it.score for it in ev.supporting), reverse=True)


def test_export_is_deterministic_and_round_trips(run):
    result, _, pipe, inp = run
    again = pipe.run_documents(pipe.load(inp), inp.content_sha256(), question="fever and infection after surgery")
    text = to_json(result)
    assert text == to_json(again)
    data = json.loads(text)
    for key in ("schema_version", "patient", "documents", "entities", "events", "relations", "conflicts", "evidence",
                "pipeline", "pipeline_version", "input_sha256"):
        assert key in data
    e = data["entities"][0]
    assert {"id", "type", "text", "span", "doc_id", "assertion", "normalized"} <= set(e)
    if data["events"]:
        assert {"start", "end", "granularity", "anchored_to"} <= set(data["events"][0]["time"])
    back = load_result("medical", text)
    assert isinstance(back, MedicalResult) and to_json(back) == text


def test_schema_and_registry():
    schema = json.loads(json_schema("medical"))
    assert "entities" in schema["properties"] and "evidence" in schema["properties"]
    assert isinstance(get_pipeline("medical"), MedicalPipeline)


def test_discover_one_input_per_patient(tmp_path):
    root = tmp_path / "patients"
    shutil.copytree(FIX / "en-appendectomy", root / "p1")
    shutil.copytree(FIX / "synthea-75e02f04" / "notes", root / "p2" / "notes")
    (root / "p2" / "PROVENANCE.md").write_text("x")
    (root / "loose.txt").write_text("Chief complaint: cough.")
    inputs = MedicalPipeline().discover(root)
    assert [i.input_id for i in inputs] == ["patients", "p1", "p2"]
    assert len(inputs[1].paths) == 6 and len(inputs[2].paths) == 5
    assert all(p.suffix == ".txt" for i in inputs for p in i.paths)
    # a folder of files directly is one patient
    direct = MedicalPipeline().discover(FIX / "en-appendectomy")
    assert len(direct) == 1 and len(direct[0].paths) == 6


def test_single_document_without_dates_marks_times_unanchored():
    doc = load_document(FIX / "zh-cmbclin-sample" / "notes" / "case_000.txt")
    result = MedicalPipeline(use_embeddings=False).run_documents([doc], doc.sha256)
    assert result.warnings and "unanchored" in result.warnings[0]
    rel = [t for t in result.times if t.text == "3小时前"]
    assert rel and rel[0].time.anchored_to == "unanchored" and rel[0].time.start is None
