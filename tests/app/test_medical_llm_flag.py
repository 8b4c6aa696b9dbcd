"""`longdoc medical --llm off|auto|on` (and the older `--engine`): the medical LLM steps run with `on`
and, for the step measured to help (medical.attention_evidence), with `auto`; the default is
$LONGDOC_LLM (the suite sets it to off), through the LLM layer's shared handle."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "medical" / "en-appendectomy"


@pytest.fixture
def calls(monkeypatch):
    import pipelines.llm.run as run_mod
    from pipelines.llm import EngineUnavailable

    seen = []

    def no_model(settings=None):
        seen.append(1)
        raise EngineUnavailable("no model in this test")

    monkeypatch.setattr(run_mod, "get_engine", no_model)
    return seen


@pytest.mark.parametrize(("flags", "runs"), [([], False), (["--llm", "off"], False), (["--llm", "auto"], True),
                                             (["--llm", "on"], True), (["--engine"], True)])
def test_llm_mode_decides_the_medical_steps(calls, flags, runs):
    from app.cli import app

    res = CliRunner().invoke(app, ["medical", str(FIX), "-q", "why was the antibiotic changed?", "--no-embeddings",
                                   "--json", *flags])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert bool(calls) is runs
    assert (out.get("llm") or {}).get("message") == ("no model in this test" if runs else None)


def test_an_unknown_llm_mode_is_a_usage_error():
    from app.cli import app

    res = CliRunner().invoke(app, ["medical", str(FIX), "--llm", "sometimes"])
    assert res.exit_code == 2 and "--llm must be off, auto or on" in res.output


def test_the_steps_use_the_layers_shared_engine(monkeypatch):
    import pipelines.llm.run as run_mod
    from pipelines.llm import LLMRun

    sentinel = object()
    monkeypatch.setattr(run_mod, "get_engine", lambda s=None: sentinel)
    assert LLMRun("on").engine() is sentinel
