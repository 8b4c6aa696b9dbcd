"""`longdoc generate`: JSON output with the default model, and a one-line error for a bad model path."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner


def _app():
    from app.cli import app

    return app


def test_generate_bad_model_is_one_line_error(tmp_path):
    res = CliRunner().invoke(_app(), ["generate", "hi", "--model", str(tmp_path / "missing.gguf"), "--device", "cpu"])
    assert res.exit_code == 1
    assert "model not found" in res.output and res.output.count("\n") == 1


@pytest.mark.model
def test_generate_json_with_the_default_model():
    res = CliRunner().invoke(_app(), ["generate", "The capital of France is", "--max-tokens", "4", "--json",
                                      "--device", "cpu", "--max-model-len", "256"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output.strip().splitlines()[-1])
    assert out["completion_tokens"] == 4 and out["finish_reason"] == "length"
    assert out["device"] == "cpu" and out["dtype"] == "float32" and out["text"].strip()
