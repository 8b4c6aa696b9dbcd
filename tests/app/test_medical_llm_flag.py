"""`longdoc medical --llm off|auto|on` (and the older `--engine`): the engine re-rank runs only with
`on` (it has no measured gain for `auto`), through the LLM layer's shared handle."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "medical" / "en-appendectomy"


@pytest.fixture
def calls(monkeypatch):
    import pipelines.medical.engine_rerank as er

    seen = []

    def no_model():
        seen.append(1)
        raise RuntimeError("no model in this test")

    monkeypatch.setattr(er, "default_llm", no_model)
    return seen


@pytest.mark.parametrize(("flags", "runs"), [([], False), (["--llm", "off"], False), (["--llm", "auto"], False),
                                             (["--llm", "on"], True), (["--engine"], True)])
def test_llm_mode_decides_the_engine_rerank(calls, flags, runs):
    from app.cli import app

    res = CliRunner().invoke(app, ["medical", str(FIX), "-q", "why was the antibiotic changed?", "--no-embeddings",
                                   "--json", *flags])
    assert res.exit_code == 0, res.output
    warnings = json.loads(res.output)["warnings"]
    assert bool(calls) is runs
    assert any("engine re-ranking skipped: no model in this test" in w for w in warnings) is runs


def test_an_unknown_llm_mode_is_a_usage_error():
    from app.cli import app

    res = CliRunner().invoke(app, ["medical", str(FIX), "--llm", "sometimes"])
    assert res.exit_code == 2 and "--llm must be off, auto or on" in res.output


def test_the_rerank_uses_the_layers_shared_engine(monkeypatch):
    import pipelines.llm.settings as settings
    import pipelines.medical.engine_rerank as er

    sentinel = object()
    monkeypatch.setattr(settings, "get_engine", lambda s=None: sentinel)
    import pipelines.llm as layer

    monkeypatch.setattr(layer, "get_engine", lambda s=None: sentinel)
    assert er.default_llm() is sentinel
