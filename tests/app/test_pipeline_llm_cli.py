"""Every pipeline command takes --llm off|auto|on and --ask: off prints exactly the rules' export,
--ask answers over the document with the spans it rests on (in the export's llm.answers), a model
that cannot load is one line with the deterministic output still printed, and batch --llm writes
the mode into each output and recomputes outputs written with another mode."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from app.cli import app

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "data" / "samples"
PATENT = SAMPLES / "patents" / "US7156074.txt"
DPA = SAMPLES / "contracts" / "en-commonpaper-dpa-1.0-to-1.1"
MEDICAL = ROOT / "tests" / "fixtures" / "medical" / "en-appendectomy"
REPORT = SAMPLES / "reports" / "en-paper-synthetic.pdf"

COMMANDS = {
    "patents": [str(PATENT)],
    "contracts": [str(DPA / "v1.txt"), str(DPA / "v2.txt")],
    "reports": [str(REPORT)],
    "medical": [str(MEDICAL), "--no-embeddings"],
}


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory) -> Path:
    from tests.engine.tiny_models import tiny_hf_model
    from tests.pipelines.llm.conftest import write_char_tokenizer

    folder = tmp_path_factory.mktemp("tiny-cli-model")
    tiny_hf_model("gemma3", seed=3, max_position_embeddings=4096).save_pretrained(folder)
    write_char_tokenizer(folder)
    return folder


def invoke(*args: str):
    return CliRunner().invoke(app, list(args))


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_off_is_the_rules_export_and_auto_only_adds_its_report(name, monkeypatch):
    import pipelines.llm.run as run_mod
    from pipelines.llm import EngineUnavailable

    def no_model(settings=None):
        raise EngineUnavailable("no model in this test")

    monkeypatch.setattr(run_mod, "get_engine", no_model)
    off = invoke(name, *COMMANDS[name], "--json", "--llm", "off")
    assert off.exit_code == 0, off.output
    assert "llm" not in json.loads(off.output)
    auto = invoke(name, *COMMANDS[name], "--json", "--llm", "auto")
    assert auto.exit_code == 0, auto.output
    out = json.loads(auto.output)
    assert out["llm"]["mode"] == "auto"
    out.pop("llm")
    # auto with no model: every deterministic field is exactly the rules' output
    assert out == {k: v for k, v in json.loads(off.output).items() if k in out}


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_ask_without_a_model_is_one_line_and_the_result_is_kept(name, tmp_path):
    missing = tmp_path / "no-such-model.gguf"
    res = invoke(name, *COMMANDS[name], "--llm", "off", "--ask", "What is this about?", "--model", str(missing),
                 "--json")
    assert res.exit_code == 1
    out = json.loads(res.stdout)
    (answer,) = out["llm"]["answers"]
    assert answer["text"] == "" and "no-such-model.gguf" in answer["error"] and "\n" not in answer["error"]
    assert out["schema_version"].startswith(name)


def test_ask_answers_with_spans_in_the_documents(tiny_model):
    res = invoke("contracts", *COMMANDS["contracts"], "--llm", "off", "--json", "--max-model-len", "4096",
                 "--ask", "Who is the Provider?", "--ask", "What law governs?", "--model", str(tiny_model),
                 "--device", "cpu", "--dtype", "float32")
    out = json.loads(res.stdout)
    answers = out["llm"]["answers"]
    assert [a["question"] for a in answers] == ["Who is the Provider?", "What law governs?"]
    texts = {v: (DPA / v).read_text(encoding="utf-8") for v in ("v1.txt", "v2.txt")}
    for a in answers:
        assert a["prompt_tokens"] > 0
        assert a["fallback"] and "did not fit" in a["fallback"]  # both versions exceed the tiny 4K context
        quoted = a["spans"] + a.get("near_misses", [])  # passages of both versions, each in its own file
        assert quoted and a["status"] in ("answered", "not_stated")
        for s in quoted:
            assert texts[s["doc_id"]][s["char_start"]:s["char_end"]] == s["text"]
    assert res.exit_code == (0 if all(a["error"] is None for a in answers) else 1)
    assert [s["step"] for s in out["llm"]["steps"]] == ["ask"]


def test_ask_on_the_terminal(tiny_model):
    res = invoke("patents", *COMMANDS["patents"], "--llm", "off", "--ask", "What is claimed?", "--model",
                 str(tiny_model), "--device", "cpu", "--dtype", "float32")
    assert "Q: What is claimed?" in res.stdout
    assert "prompt " in res.stdout and "s in all" in res.stdout


def test_empty_question_is_a_usage_error():
    res = invoke("patents", str(PATENT), "--ask", "  ")
    assert res.exit_code == 2 and "--ask" in res.output


def test_bad_mode_is_a_usage_error():
    res = invoke("reports", str(REPORT), "--llm", "sometimes")
    assert res.exit_code == 2 and "off, auto or on" in res.output


def test_batch_records_the_mode_and_recomputes_on_change(tmp_path, monkeypatch):
    import pipelines.llm.run as run_mod
    from pipelines.llm import EngineUnavailable

    def no_model(settings=None):
        raise EngineUnavailable("no model in this test")

    monkeypatch.setattr(run_mod, "get_engine", no_model)
    folder = tmp_path / "in"
    folder.mkdir()
    shutil.copy(PATENT, folder / PATENT.name)
    out = tmp_path / "out"
    first = invoke("batch", str(folder), "--pipeline", "patents", "--out", str(out), "--json", "--llm", "off")
    assert first.exit_code == 0, first.output
    written = next(out.rglob("US7156074*.json"))
    assert "llm" not in json.loads(written.read_text())
    again = invoke("batch", str(folder), "--pipeline", "patents", "--out", str(out), "--json", "--llm", "off")
    assert json.loads(again.stdout)["counts"]["skipped"] == 1
    auto = invoke("batch", str(folder), "--pipeline", "patents", "--out", str(out), "--json", "--llm", "auto")
    assert json.loads(auto.stdout)["counts"]["ok"] == 1  # written with another mode: recomputed
    assert json.loads(written.read_text())["llm"]["mode"] == "auto"


def test_cache_dir_keeps_the_document_for_the_next_run(tiny_model, tmp_path):
    from pipelines.llm import forget_engines

    args = ["patents", *COMMANDS["patents"], "--llm", "off", "--json", "--model", str(tiny_model), "--device", "cpu",
            "--dtype", "float32", "--cache-dir", str(tmp_path / "kv")]
    first = json.loads(invoke(*args, "--ask", "What is claimed?").stdout)["llm"]
    forget_engines()  # as a new process would: nothing in memory, the disk cache only
    second = json.loads(invoke(*args, "--ask", "Which valve?").stdout)["llm"]
    r1, r2 = first["steps"][0]["reuse"], second["steps"][0]["reuse"]
    assert r1.get("documents_loaded", 0) == 0 and r2.get("documents_computed", 0) == 0
    # placed: the document loaded whole from the disk store; shared: its whole prefill chunks from the
    # prefix cache's disk tier (a new engine: nothing in memory, so only the disk can have served the
    # answer's request; both runs' attribution passes read the prompt back from memory alike)
    assert r2.get("documents_loaded", 0) == 1 or r2.get("prefix_hit_tokens", 0) - r1.get("prefix_hit_tokens", 0) >= 1024


def test_first_ctrl_c_stops_the_llm_steps_second_quits():
    import os
    import signal
    import time

    from app.commands.llm_options import make_run, stop_on_ctrl_c

    run = make_run("on", None, None, None, None, None)
    with stop_on_ctrl_c(run):
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.05)
        assert run.cancel.is_set()
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.05)
    assert signal.getsignal(signal.SIGINT) is not None  # the previous handler is back


def test_a_cache_dir_that_is_a_file_is_a_usage_error_before_any_analysis(tmp_path):
    not_a_folder = tmp_path / "cache"
    not_a_folder.write_text("x")
    res = invoke("patents", str(PATENT), "--llm", "on", "--cache-dir", str(not_a_folder))
    assert res.exit_code == 2 and "is a file, not a folder" in res.output
    assert "claims" not in res.stdout  # refused before the analysis, not after it


@pytest.mark.parametrize("where", ["folder", "under_a_file"])
def test_html_path_that_cannot_be_written_is_refused_before_the_analysis(tmp_path, where):
    (tmp_path / "f").write_text("x")
    target = tmp_path if where == "folder" else tmp_path / "f" / "r.html"
    res = invoke("contracts", *COMMANDS["contracts"], "--html", str(target))
    assert res.exit_code == 2, res.output
    assert res.output.count("\n") == 1 and "--html" in res.output
    assert ("is a folder" if where == "folder" else "is a file, not a folder") in res.output


def _span(text: str, a: int, b: int, score: float = 0.8):
    from pipelines.llm.run import AnswerSpan

    return AnswerSpan(doc_id="d.txt", char_start=a, char_end=b, text=text[a:b], page=1, score=score)


def test_answer_lines_are_evidence_first():
    from app.commands.llm_options import answer_lines
    from pipelines.documents import SourceSpan
    from pipelines.llm.run import Answer

    text = "Payment is due within 30 days of the invoice. This Agreement is governed by the laws of Delaware."
    quote = _span(text, 0, 45)
    value = SourceSpan(doc_id="d.txt", char_start=22, char_end=29, text=text[22:29], page=1)
    shown = Answer(question="When is payment due?", text="30 days", confidence=0.82, kind="period", value=value,
                   spans=[quote], model_text="Payment is due in 90 days.", model_supported=False, prompt_tokens=10)
    lines = answer_lines([shown])
    assert lines[1] == "A: 30 days  [confidence 82%]"
    assert "»30 days«" in lines[2] and "d.txt p.1 [0:45]" in lines[2]
    assert not any("90 days" in line for line in lines)  # unsupported model text is never printed
    supported = shown.model_copy(update={"model_text": "within 30 days", "model_supported": True})
    assert any("in the model's words (carried by the quote): within 30 days" in line for line in answer_lines([supported]))
    weak = shown.model_copy(update={"confidence": 0.42})
    assert answer_lines([weak])[1] == "A (low confidence, check the quote): 30 days  [confidence 42%]"
    other = weak.model_copy(update={"confidence": 0.82, "calibrated": False})
    assert answer_lines([other])[1] == "A: 30 days  [confidence 82%, not calibrated for this model]"
    missing = Answer(question="What is the cap?", text="not stated in the document", status="not_stated",
                     confidence=0.7, near_misses=[_span(text, 46, len(text), 0.1)])
    lines = answer_lines([missing])
    assert lines[1] == "A: not stated in the document  [confidence 70%]"
    assert lines[2].startswith("   nearest (10%): d.txt p.1 [46:") and "Delaware" in lines[2]
    failed = Answer(question="Q?", text="", status="error", error="cancelled after 1.0 s")
    assert answer_lines([failed])[1] == "A: (no answer: cancelled after 1.0 s)"


def test_generate_says_what_is_loading_and_how_long_it_took(tiny_model):
    res = invoke("generate", "abc", "-n", "3", "--model", str(tiny_model), "--device", "cpu", "--dtype", "float32")
    assert res.exit_code == 0, res.output
    assert "model loaded in " in res.output and "on cpu" in res.output
    quiet = invoke("generate", "abc", "-n", "3", "--json", "--model", str(tiny_model), "--device", "cpu")
    assert "model loaded" not in quiet.output  # --json prints one JSON object and nothing else
