"""Review tables (`longdoc batch FOLDER --ask ... --out DIR`, app/review.py) on a tiny random Gemma
with a character tokenizer: the table's shape, CSV/XLSX that open and hold the answers, a re-run
with one more question computing only that column, a bad file as one row with its error, the JSON
schema, and an input over the context read through the pipeline's units (clauses, claims)."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from app import review
from app.cli import app

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "data" / "samples"
PATENTS = [SAMPLES / "patents" / "US7156074.txt", SAMPLES / "patents" / "US6836979.txt"]
DPA = SAMPLES / "contracts" / "en-commonpaper-dpa-1.0-to-1.1"
BIG_PATENT = SAMPLES / "patents" / "US7643973.txt"


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory) -> Path:
    from tests.engine.tiny_models import tiny_hf_model
    from tests.pipelines.llm.conftest import write_char_tokenizer

    folder = tmp_path_factory.mktemp("tiny-review-model")
    tiny_hf_model("gemma3", seed=3, max_position_embeddings=4096).save_pretrained(folder)
    write_char_tokenizer(folder)
    return folder


@pytest.fixture(autouse=True)
def _one_torch_thread():
    import torch

    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def engine_args(model: Path, context: int = 4096) -> list[str]:
    return ["--model", str(model), "--device", "cpu", "--dtype", "float32", "--max-model-len", str(context),
            "--llm", "off"]


def invoke(*args: str):
    return CliRunner().invoke(app, list(args))


@pytest.fixture
def patent_folder(tmp_path) -> Path:
    folder = tmp_path / "in"
    folder.mkdir()
    for p in PATENTS:  # the second cut to 2,500 characters: the test stays fast
        (folder / p.name).write_text(p.read_text(encoding="utf-8")[:2500], encoding="utf-8")
    (folder / "broken.pdf").write_bytes(b"%PDF-1.4 not really a pdf")
    return folder


def test_questions_file_format():
    qs = review.parse_questions(["What is claimed?"], "# comment\n\nlaw: Which law governs?\n"
                                "term\tHow long is the term?\nWhat is the cap: fees or a sum?\n"
                                "What is claimed?\n")
    assert [(q.name, q.text) for q in qs] == [
        ("Q1", "What is claimed?"), ("law", "Which law governs?"), ("term", "How long is the term?"),
        ("Q4", "What is the cap: fees or a sum?")]
    with pytest.raises(ValueError):
        review.parse_questions([], "# only a comment\n")
    with pytest.raises(ValueError):
        review.parse_questions(["  "])


def test_table_csv_xlsx_bad_file_and_resume(tiny_model, patent_folder, tmp_path):
    import openpyxl

    out = tmp_path / "out"
    qfile = tmp_path / "questions.txt"
    qfile.write_text("claimed: What is claimed?\nWhat is the first element?\n", encoding="utf-8")
    res = invoke("batch", str(patent_folder), "--pipeline", "patents", "--out", str(out), "--questions", str(qfile),
                 *engine_args(tiny_model), "--quiet")
    assert res.exit_code == 1, res.output  # the broken PDF failed; the batch went on
    table = json.loads((out / "review.json").read_text(encoding="utf-8"))
    assert table["schema_version"] == "review/2.1" and table["pipeline"] == "review"
    assert len(table["input_sha256"]) == 64 and "Gemma" not in table["model"]
    review.ReviewTable.model_validate(table)
    assert [q["name"] for q in table["questions"]] == ["claimed", "Q2"]
    rows = {r["input_id"]: r for r in table["rows"]}
    assert sorted(rows) == ["US6836979.txt", "US7156074.txt", "broken.pdf"]
    assert "broken.pdf: broken PDF" in rows["broken.pdf"]["error"] and rows["broken.pdf"]["cells"] == []
    texts = {p.name: (patent_folder / p.name).read_text(encoding="utf-8") for p in PATENTS}
    for name in texts:
        r = rows[name]
        assert r["error"] is None and [c["name"] for c in r["cells"]] == ["claimed", "Q2"]
        assert r["documents"][0]["source_name"] == name
        for c in r["cells"]:
            assert c["answer"] or c["error"]
            assert c["fallback"] is None  # both fit the 4K context
            assert c["status"] in ("answered", "not_stated") and 0 <= c["confidence"] <= 1
            for s in c["spans"] + c["near_misses"]:
                assert texts[name][s["char_start"]:s["char_end"]] == s["text"]
            if c["status"] == "answered":  # evidence first: every shown answer quotes its passage
                assert c["spans"] and not c["near_misses"]
                if c["value"] is not None:
                    v, top = c["value"], c["spans"][0]
                    assert c["answer"] == v["text"] and top["char_start"] <= v["char_start"] <= v["char_end"] <= top["char_end"]
                if not c["model_supported"] and c["model_text"]:
                    assert c["answer"] != c["model_text"] or c["answer"] in texts[name]
            else:
                assert not c["spans"] and c["near_misses"] and c["answer"] == "not stated in the document"
    assert any(c["spans"] or c["near_misses"] for name in texts for c in rows[name]["cells"])  # checks above ran
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert summary["counts"]["failed"] == 1 and summary["failures"][0]["input"] == "broken.pdf"

    with open(out / "review.csv", newline="", encoding="utf-8") as fh:
        grid = list(csv.reader(fh))
    assert grid[0] == ["document", "files", "error", "claimed", "Q2"] and len(grid) == 4
    by_doc = {line[0]: line for line in grid[1:]}
    cell = rows["US7156074.txt"]["cells"][0]
    assert by_doc["US7156074.txt"][3] == review._safe(review.cell_text(review.Cell(**cell)))
    assert by_doc["broken.pdf"][2] == rows["broken.pdf"]["error"]
    wb = openpyxl.load_workbook(out / "review.xlsx")
    assert wb.sheetnames == ["Answers", "Sources", "Questions"]
    sheet = {r[0]: r for r in wb["Answers"].iter_rows(values_only=True)}
    assert sheet["US7156074.txt"][3] == (review.cell_text(review.Cell(**cell)) or None)
    assert [r[1] for r in wb["Questions"].iter_rows(min_row=2, values_only=True)] == [
        "What is claimed?", "What is the first element?"]
    assert wb["Sources"].max_row == 1 + 4  # one line per cell of the two readable patents

    # one more question: only that column is computed; the others are kept as they were
    row_file = out / "review" / "patents" / "US7156074.txt.json"
    before = json.loads(row_file.read_text(encoding="utf-8"))["cells"]
    again = invoke("batch", str(patent_folder), "--pipeline", "patents", "--out", str(out), "--questions", str(qfile),
                   "--ask", "Who is the inventor?", *engine_args(tiny_model), "--quiet", "--json")
    summary = json.loads(again.stdout)
    lines = {i["input_id"]: i for i in summary["inputs"]}
    for name in texts:  # one input at a time on the CPU by default (--group 1)
        assert lines[name]["summary"] == "1 cells computed, 2 reused", lines[name]
    after = json.loads(row_file.read_text(encoding="utf-8"))["cells"]
    assert [c["question"] for c in after] == ["Who is the inventor?", "What is claimed?", "What is the first element?"]
    assert after[1:] == before  # same seconds, same everything: not recomputed
    # nothing new: every row up to date
    third = invoke("batch", str(patent_folder), "--pipeline", "patents", "--out", str(out), "--questions", str(qfile),
                   "--ask", "Who is the inventor?", *engine_args(tiny_model), "--quiet", "--json")
    assert json.loads(third.stdout)["counts"]["skipped"] == 2


def test_grouped_rows_share_one_engine_batch_and_equal_rows_computed_alone(tiny_model, patent_folder, tmp_path,
                                                                           monkeypatch):
    from engine import LLM

    calls = []
    real = LLM.generate_shared_batch

    def spy(self, groups, *a, **k):
        calls.append(len(groups))
        return real(self, groups, *a, **k)

    monkeypatch.setattr(LLM, "generate_shared_batch", spy)
    rows = {}
    for group in (1, 3):
        out = tmp_path / f"out{group}"
        res = invoke("batch", str(patent_folder), "--pipeline", "patents", "--out", str(out), "--ask", "What is claimed?",
                     "--ask", "Who is the inventor?", "--group", str(group), *engine_args(tiny_model), "--quiet")
        assert res.exit_code == 1, res.output  # broken.pdf
        table = json.loads((out / "review.json").read_text(encoding="utf-8"))
        rows[group] = {r["input_id"]: [(c["answer"], c["error"], [(s["char_start"], s["char_end"]) for s in c["spans"]])
                                       for c in r["cells"]] for r in table["rows"]}
    # group 1: one call per readable patent; group 3: both patents (and the broken file, which fails
    # before the engine) in one call of two heads
    assert calls == [1, 1, 2]
    assert rows[1] == rows[3] and len(rows[3]["US7156074.txt"]) == 2
    summary = json.loads((tmp_path / "out3" / "summary.json").read_text(encoding="utf-8"))
    grouped = {i["input_id"]: i.get("summary") for i in summary["inputs"]}
    assert grouped["US7156074.txt"] == "2 cells computed, 0 reused (in one engine batch with 1 other input)"


def test_over_the_context_the_pipeline_units_are_read(tiny_model, tmp_path):
    folder = tmp_path / "in"
    (folder / "dpa").mkdir(parents=True)
    for v in ("v1.txt", "v2.txt"):
        shutil.copy(DPA / v, folder / "dpa" / v)
    out = tmp_path / "out"
    res = invoke("batch", str(folder), "--pipeline", "contracts", "--out", str(out), "--ask",
                 "When does the Term of Agreement end?", *engine_args(tiny_model, 1024), "--quiet")
    assert res.exit_code in (0, 1), res.output
    (row,) = json.loads((out / "review.json").read_text(encoding="utf-8"))["rows"]
    (c,) = row["cells"]
    assert c["fallback"].startswith("did not fit") and " clauses chosen by relevance" in c["fallback"]
    assert "term of agreement" in c["fallback"].lower()  # the clause named for the question was read
    texts = {d["doc_id"]: (DPA / d["source_name"]).read_text(encoding="utf-8") for d in row["documents"]}
    quoted = c["spans"] + c["near_misses"]  # the quoted passages, or the near misses when not stated
    assert quoted
    for s in quoted:  # mapped back from what was read to the source versions
        assert texts[s["doc_id"]][s["char_start"]:s["char_end"]] == s["text"]


def test_patent_over_the_context_reads_claims(tiny_model, tmp_path):
    from pipelines.documents import load_document
    from pipelines.llm import EngineSettings, LLMRun

    doc = load_document(BIG_PATENT)
    run = LLMRun("off", EngineSettings(model=str(tiny_model), device="cpu", dtype="float32", max_model_len=1024))
    (c,) = review.answer_questions(run, "patents", [doc], [review.Question("c1", "What does claim 1 claim?")], ["k"])
    assert "claims and paragraphs chosen by relevance" in c.fallback and "claim 1" in c.fallback
    assert c.spans + c.near_misses
    for s in c.spans + c.near_misses:
        assert doc.text[s.char_start:s.char_end] == s.text


def test_xlsx_and_csv_keep_document_text_as_text():
    import io

    import openpyxl

    cell = review.Cell(name="q", question="q?", answer="=HYPERLINK(\"http://x\")", key="k")
    row = review.Row(input_id="a.txt", source_pipeline="patents", files=["a.txt"], input_sha256="0" * 64, cells=[cell])
    table = review.build_table([row], [review.Question("q", "q?")], "m")
    wb = openpyxl.load_workbook(io.BytesIO(review.to_xlsx(table)))
    c = wb["Answers"].cell(row=2, column=4)
    assert c.value == "=HYPERLINK(\"http://x\")" and c.data_type == "s"
    assert "'=HYPERLINK" in review.to_csv(review.grid_rows(table))


def test_json_schema_is_versioned():
    schema = review.ReviewTable.model_json_schema()
    assert schema["properties"]["schema_version"]["default"] == "review/2.1"
    assert {"input_sha256", "questions", "rows", "model", "confidence"} <= set(schema["properties"])
