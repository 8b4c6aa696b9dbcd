"""Questions the claim tree answers exactly (pipelines.patents.answers), held to the truth files'
dependencies, in English and Chinese; every quote is the claim text that shows the answer; other
questions are left to evidence search; `--ask` answers them without loading a model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipelines.documents import load_document
from pipelines.patents import PatentsPipeline
from pipelines.patents.answers import structure_answer

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "patents"


def _load(name: str):
    doc = load_document(FIX / f"{name}.txt")
    truth = {c["number"]: c for c in json.loads((FIX / f"{name}.truth.json").read_text(encoding="utf-8"))["claims"]}
    return doc, PatentsPipeline().run_documents([doc]), truth


def _quotes_ok(doc, answer) -> None:
    assert answer.spans and answer.route == "structure" and answer.confidence == 1.0
    for s in answer.spans:
        assert doc.text[s.char_start:s.char_end] == s.text


@pytest.mark.parametrize("name", ["US6836979", "US6981466", "CN110326254A"])
def test_dependencies_and_independent_claims_match_the_truth(name):
    doc, result, truth = _load(name)
    zh = name.startswith("CN")
    ind = sorted(n for n, c in truth.items() if c["type"] == "independent")
    a = structure_answer(result, doc, "独立权利要求有哪些？" if zh else "Which claims are independent?")
    _quotes_ok(doc, a)
    assert [int(s.text.split(".")[0]) for s in a.spans] == ind
    for n, c in truth.items():
        if c["type"] != "dependent" or len(c["depends_on"]) != 1:
            continue
        q = f"权利要求{n}引用哪项权利要求？" if zh else f"What claim does claim {n} depend on?"
        a = structure_answer(result, doc, q)
        _quotes_ok(doc, a)
        parent = c["depends_on"][0]
        assert str(parent) in a.text and a.value is not None and str(parent) in a.value.text


def test_dependents_and_elements():
    doc, result, truth = _load("US6836979")
    kids = sorted(n for n, c in truth.items() if 1 in c["depends_on"])
    a = structure_answer(result, doc, "Which claims depend on claim 1?")
    _quotes_ok(doc, a)
    assert all(str(k) in a.text for k in kids)
    a = structure_answer(result, doc, "What are the elements of claim 1?")
    _quotes_ok(doc, a)
    claim1 = next(c for c in result.claims if c.number == 1)
    assert a.text.startswith("Claim 1 recites: ") and [(s.char_start, s.char_end) for s in a.spans] == [
        (e.char_start, e.char_end) for e in claim1.elements]
    missing = structure_answer(result, doc, "What claim does claim 99 depend on?")
    assert missing.status == "not_stated" and "no claim 99" in missing.text


def test_other_questions_go_to_evidence_search():
    doc, result, _ = _load("US6836979")
    for q in ("What material are the inserts made of?", "Who is the inventor?", "What does the sole comprise?"):
        assert structure_answer(result, doc, q) is None


def test_ask_on_the_command_line_needs_no_model_for_structure_questions(tmp_path):
    from typer.testing import CliRunner

    from app.cli import app

    res = CliRunner().invoke(app, ["patents", str(FIX / "US6836979.txt"), "--llm", "off", "--json",
                                   "--ask", "Which claims are independent?",
                                   "--model", str(tmp_path / "no-such-model.gguf")])
    assert res.exit_code == 0, res.output
    (a,) = json.loads(res.stdout)["llm"]["answers"]
    assert a["route"] == "structure" and a["text"] == "Claims 1 and 19 are independent." and a["error"] is None
