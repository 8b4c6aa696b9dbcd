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
    from pipelines.documents import Document
    from pipelines.llm import EngineSettings, LLMRun, get_engine

    # room for the evidence pass's short reads (8 passages at a time) beside the cached document: with
    # the sliding pool sized for fewer sequences they would take the document's cached window blocks
    settings = EngineSettings(model=str(tiny_model), device="cpu", dtype="float32", max_model_len=1024,
                              max_prefill_chunk=32, max_num_seqs=64)
    llm = get_engine(settings)
    doc = Document.from_text(TEXT)
    run = LLMRun("off", settings, engine=llm)
    (first,) = run.ask(doc, ["Who delivers?"], max_tokens=4)
    hits = llm.counters().prefix_hits
    (second,) = run.ask(doc, ["Which law governs?"], max_tokens=4)
    assert first.error is None and second.error is None
    doc_tokens = len(llm.encode(doc.text, add_special_tokens=False))
    assert run.records[1].reuse["prefix_hit_tokens"] >= doc_tokens - 32  # the head up to its last block
    assert llm.counters().prefix_hits > hits and second.cached_prompt_tokens >= doc_tokens - 32


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
    assert out["step"]["step"] == "ask" and out["step"]["ran"] and out["step"]["requests"] == 2
    for a in out["answers"]:  # evidence first: a quoted passage of the file, or "not stated" with near misses
        assert a["status"] in ("answered", "not_stated") and 0 <= a["confidence"] <= 1 and a["finish_reason"]
        assert a.get("fallback_report") is None
        quoted = a["spans"] if a["status"] == "answered" else a["near_misses"]
        assert quoted and all(TEXT[s["char_start"]:s["char_end"]] == s["text"] for s in quoted)
        if a["status"] == "answered" and not a["model_supported"]:
            assert a["text"] != a["model_text"] or a["text"] in TEXT  # unsupported model text is never the answer
    text = CliRunner().invoke(app, args)
    assert text.exit_code == 0 and text.output.count("Q: ") == 2 and "tokens" in text.output
    assert text.output.count("quote (") + text.output.count("nearest (") >= 2
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


def test_the_ask_page_quotes_the_passages_that_hold_the_answer(tiny_model, monkeypatch):
    from streamlit.testing.v1 import AppTest

    from app.ui import ask_page

    for var, value in {"LONGDOC_MODEL": str(tiny_model), "LONGDOC_DEVICE": "cpu", "LONGDOC_DTYPE": "float32",
                       "LONGDOC_MAX_MODEL_LEN": "1024"}.items():
        monkeypatch.setenv(var, value)
    at = AppTest.from_function(_ask_page_script, default_timeout=120)
    at.session_state[ask_page.PENDING] = ("c.txt", TEXT.encode(), "Who delivers?", "retrieval", 8, None)
    at.run()
    assert not at.exception, at.exception
    answer = at.session_state[ask_page.RESULT]["answer"]
    assert answer.error is None and answer.status in ("answered", "not_stated")
    quoted = answer.spans if answer.status == "answered" else answer.near_misses
    assert quoted and all(TEXT[s.char_start:s.char_end] == s.text for s in quoted)
    assert any(re.match(r"c\\\.txt · page 1 · \[\d\] \d+%.* likely to hold the answer", c.value) for c in at.caption), \
        [c.value for c in at.caption]
    htmls = [e.proto.body for e in at.main if type(e).__name__ == "Html"]
    # excerpts around the quoted passages, not the whole document
    assert htmls and all("likely to hold the answer" in h and len(h) < len(TEXT) + 2000 for h in htmls)
    if answer.status == "answered" and not answer.model_supported and answer.model_text:
        assert not any(answer.model_text in m.value for m in at.info)  # unsupported model text is never shown
