"""`longdoc generate --chat` on a model without a chat template fails before any weight is loaded,
in CLI terms; `engine.has_chat_template` reads the metadata only."""

from __future__ import annotations

import json
import time

import pytest
from typer.testing import CliRunner

from app.cli import app


@pytest.fixture
def no_weights(monkeypatch):
    """Loading an engine fails the test: the check must come first."""
    import pipelines.llm

    def refuse(*a, **k):
        raise AssertionError("the weights were loaded before --chat was checked")

    monkeypatch.setattr(pipelines.llm, "get_engine", refuse)


def test_chat_on_the_default_base_model_says_so_before_loading(no_weights, monkeypatch):
    monkeypatch.delenv("LONGDOC_MODEL", raising=False)
    t0 = time.perf_counter()
    res = CliRunner().invoke(app, ["generate", "hi", "--chat", "--device", "cpu"])
    took = time.perf_counter() - t0
    assert res.exit_code == 2, res.output
    assert res.stderr.strip() == ("longdoc: --chat needs a model with a chat template; the default Gemma 3 270M is "
                                  "a base model; drop --chat or pass --model")
    assert took < 20, took  # a header read, not a 24 s load (generous for a loaded machine)


def test_chat_on_a_folder_without_template_names_it(no_weights, tmp_path):
    folder = tmp_path / "base"
    folder.mkdir()
    (folder / "tokenizer_config.json").write_text(json.dumps({"bos_token": "<s>"}), encoding="utf-8")
    res = CliRunner().invoke(app, ["generate", "hi", "--chat", "--model", str(folder)])
    assert res.exit_code == 2 and f"{folder} has none" in res.stderr


def test_has_chat_template_reads_folders_and_gguf(tmp_path):
    from engine import ModelLoadError, has_chat_template

    folder = tmp_path / "m"
    folder.mkdir()
    assert has_chat_template(folder) is False
    (folder / "tokenizer_config.json").write_text(json.dumps({"chat_template": "{{ messages }}"}), encoding="utf-8")
    assert has_chat_template(folder) is True
    (folder / "tokenizer_config.json").write_text(json.dumps({"chat_template": ""}), encoding="utf-8")
    assert has_chat_template(folder) is False
    (folder / "chat_template.jinja").write_text("{{ messages }}", encoding="utf-8")
    assert has_chat_template(folder) is True
    assert has_chat_template(None) is False  # the packaged Gemma 3 270M: a base model
    with pytest.raises(ModelLoadError):
        has_chat_template(tmp_path / "missing.gguf")
