"""`longdoc ask` stops where a base model starts the prompt format's next turn, never shows the
model's words when the quoted passages do not carry them, and answers from the evidence when the
model says nothing. Two tiny models whose next character depends only on the last one (every block's
output projection zeroed, the head mapping each character to the one that follows it) make Gemma
3 270M's two failures on demand: an answer that runs on into "\\nAnswer: …" lines, and a reply
that begins with "\\nAnswer:" at once (seen with the real model on the US7156074 sample and the
question "What color is the hinge?": a blank "A:" and exit 0)."""

from __future__ import annotations

import json

import pytest
import torch
from typer.testing import CliRunner

from tests.engine.tiny_models import tiny_hf_model
from tests.pipelines.llm.conftest import CHARS, _one_torch_thread, write_char_tokenizer  # noqa: F401 (autouse fixture)

TEXT = "The supplier shall deliver the goods within 30 days. Payment is due on delivery.\n"


def _chain_model(folder, chain: str):
    """A llama with the character tokenizer that, greedy, writes after each character of `chain`
    the character that follows it there (after the prompt's final ":" comes chain[1])."""
    vocab = {ch: i + 2 for i, ch in enumerate(CHARS)}  # as write_char_tokenizer numbers them
    model = tiny_hf_model("llama", seed=5, max_position_embeddings=2048)
    with torch.no_grad():
        for layer in model.model.layers:
            layer.self_attn.o_proj.weight.zero_()
            layer.mlp.down_proj.weight.zero_()
        h = model.model.norm(model.model.embed_tokens.weight)  # each token's last hidden state
        head = torch.zeros_like(model.lm_head.weight)
        for a, b in zip(chain, chain[1:], strict=False):
            head[vocab[b]] += 20 * h[vocab[a]] / h[vocab[a]].norm() ** 2
        model.lm_head.weight.copy_(head)
    model.save_pretrained(folder)
    write_char_tokenizer(folder)
    return folder


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    return {"run_on": _chain_model(tmp_path_factory.mktemp("run-on"), ": 42\nAnswer:"),
            "empty": _chain_model(tmp_path_factory.mktemp("empty"), ":\nAnswer:")}


def _ask(model, tmp_path, *extra):
    doc = tmp_path / "c.txt"
    doc.write_text(TEXT, encoding="utf-8")
    from app.cli import app

    return CliRunner().invoke(app, ["ask", str(doc), "-q", "Who delivers?", "-n", "24", "--model", str(model),
                                    "--device", "cpu", "--dtype", "float32", "--max-model-len", "512", *extra])


def test_an_answer_stops_before_the_next_answer_line(models, tmp_path):
    res = _ask(models["run_on"], tmp_path)
    assert res.exit_code == 0, res.output
    assert "Answer:" not in res.output  # without the stop: "42\nAnswer: 42\nAnswer: …"
    out = json.loads(_ask(models["run_on"], tmp_path, "--json").output.strip().splitlines()[-1])
    (answer,) = out["answers"]
    assert answer["model_text"] == "42" and answer["finish_reason"] == "stop" and answer["error"] is None
    # "42" is nowhere in the document: the quotes do not carry it, so it is never the shown answer
    assert answer["model_supported"] is False and answer["text"] != "42" and "A: 42" not in res.output


def test_an_answer_that_begins_with_the_stop_text_still_gets_its_evidence(models, tmp_path):
    res = _ask(models["empty"], tmp_path)
    assert res.exit_code == 0, res.output
    assert "A: \n" not in res.output + "\n"  # never a blank answer line
    out = json.loads(_ask(models["empty"], tmp_path, "--json").output.strip().splitlines()[-1])
    (answer,) = out["answers"]
    assert answer["model_text"] is None and answer["error"] is None
    assert answer["status"] in ("answered", "not_stated") and answer["text"]
    quoted = answer["spans"] or answer["near_misses"]
    assert quoted and all(TEXT[s["char_start"]:s["char_end"]] == s["text"] for s in quoted)
