"""`longdoc ask` and the Ask page's flow (app/ask.py) through the LLM layer, on a tiny random-weight
Gemma 3 with a character tokenizer: one engine handle for the process, all questions in one
batch, and a second question over the same document taking the document from the cache."""

from __future__ import annotations

import json
import re

import pytest
from typer.testing import CliRunner

from tests.engine.tiny_models import tiny_hf_model
from tests.pipelines.llm.conftest import _one_torch_thread, write_char_tokenizer  # noqa: F401 (autouse fixture)

TEXT = ("The supplier shall deliver the goods within 30 days. Payment is due on delivery. "
        "Either party may end this agreement with 60 days notice. The law of Ontario governs it. ") * 3


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tiny-ask")
    tiny_hf_model("gemma3", seed=4, max_position_embeddings=2048).save_pretrained(folder)
    write_char_tokenizer(folder)
    return folder


def test_a_second_question_does_not_recompute_the_document(tiny_model):
    from app import ask as asking
    from pipelines.documents import Document
    from pipelines.llm import EngineSettings, get_engine

    llm = get_engine(EngineSettings(model=str(tiny_model), device="cpu", dtype="float32", max_model_len=1024,
                                    max_prefill_chunk=32))
    doc = Document.from_text(TEXT)
    policy = asking.policy_for("retrieval")
    first = asking.ask(llm, doc, ["Who delivers?"], policy, max_tokens=4)
    hits = llm.counters().prefix_hits
    second = asking.ask(llm, doc, ["Which law governs?"], policy, max_tokens=4)
    assert first.items[0].ok and second.items[0].ok
    doc_tokens = len(llm.encode(doc.text, add_special_tokens=False))
    from pipelines.llm.requests import resolve_strategy

    assert second.strategy == resolve_strategy(asking.STRATEGY)
    if second.strategy == "prefix":  # the head up to its last block boundary comes from the cache
        assert second.reuse["prefix_hit_tokens"] >= doc_tokens - 32
        assert llm.counters().prefix_hits > hits
    else:
        assert second.reuse["documents_computed"] == 0 and second.reuse["documents_loaded"] == 1
    assert "prompt" in asking.summary(second.items[0], second.seconds)


def test_cli_ask_answers_every_question_in_one_batch(tiny_model, tmp_path):
    from app.cli import app

    doc = tmp_path / "c.txt"
    doc.write_text(TEXT, encoding="utf-8")
    args = ["ask", str(doc), "-q", "Who delivers?", "-q", "Which law governs?", "-n", "3", "--model", str(tiny_model),
            "--device", "cpu", "--dtype", "float32", "--max-model-len", "1024"]
    res = CliRunner().invoke(app, [*args, "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output.strip().splitlines()[-1])
    assert [a["question"] for a in out["answers"]] == ["Who delivers?", "Which law governs?"]
    assert out["batch"]["status"] == "ok" and out["batch"]["strategy"] in ("prefix", "placement")
    assert all(not a["fallback"]["fallback_triggered"] and a["finish_reason"] for a in out["answers"])
    text = CliRunner().invoke(app, [*args, "--attribute"])
    assert text.exit_code == 0 and text.output.count("Q: ") == 2 and "tokens" in text.output
    assert text.output.count("rests on [") >= 2
    spans = json.loads(CliRunner().invoke(app, [*args, "--attribute", "--json"]).output.strip().splitlines()[-1])
    for a in spans["answers"]:
        assert a["spans"] and all(TEXT[s["char_start"]:s["char_end"]] == s["text"] for s in a["spans"])
    long_q = CliRunner().invoke(app, ["ask", str(doc), "-q", "Why " * 300, "--fallback", "error", *args[6:]])
    assert long_q.exit_code == 1 and "max_model_len" in long_q.output  # the item's error, on its summary line


def test_cli_ask_with_a_model_that_cannot_load_is_one_line(tmp_path):
    from app.cli import app

    doc = tmp_path / "c.txt"
    doc.write_text("Some text.", encoding="utf-8")
    res = CliRunner().invoke(app, ["ask", str(doc), "-q", "why?", "--model", str(tmp_path / "none.gguf"),
                                   "--device", "cpu"])
    assert res.exit_code == 1 and res.output.count("\n") == 1 and "no model could be loaded" in res.output


def _ask_page_script() -> None:
    from app.ui.ask_page import page

    page()


def test_the_ask_page_marks_the_sentences_the_answer_rests_on(tiny_model, monkeypatch):
    from streamlit.testing.v1 import AppTest

    from app.ui import ask_page

    for var, value in {"LONGDOC_MODEL": str(tiny_model), "LONGDOC_DEVICE": "cpu", "LONGDOC_DTYPE": "float32",
                       "LONGDOC_MAX_MODEL_LEN": "1024"}.items():
        monkeypatch.setenv(var, value)
    at = AppTest.from_function(_ask_page_script, default_timeout=120)
    at.session_state[ask_page.PENDING] = ("c.txt", TEXT.encode(), "Who delivers?", "retrieval", 8, None, True)
    at.run()
    assert not at.exception, at.exception
    assert any(re.match(r"c\\\.txt · page 1 · \[\d\] \d+%", c.value) for c in at.caption), [c.value for c in at.caption]
    htmls = [e.proto.body for e in at.main if type(e).__name__ == "Html"]
    # excerpts around the marked sentences, not the whole document
    assert htmls and all("the answer rests on this" in h and len(h) < len(TEXT) + 2000 for h in htmls)
    res = at.session_state[ask_page.RESULT]
    assert res["item"].spans and all(TEXT[a.source.char_start:a.source.char_end] == a.source.text
                                     for a in res["item"].spans)
