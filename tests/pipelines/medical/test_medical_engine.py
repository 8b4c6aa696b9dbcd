"""The optional engine re-ranking step: its logic with a stand-in for `LLM.attribute` (fast,
always run), and once with the real default model (opt-in: LONGDOC_MEDICAL_ENGINE=1, ~1 minute
on a 2-core CPU). The pipeline never needs it."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import pytest

from pipelines.medical.engine_rerank import build_prompt, rerank
from pipelines.medical.pipeline import MedicalPipeline

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "medical"


@dataclass
class _Span:
    share: float


@dataclass
class _Out:
    spans: list


class FakeLLM:
    """Puts all attention on the sentence that contains `word`."""

    def __init__(self, word: str):
        self.word = word
        self.calls = []

    def attribute(self, prompt, answer, spans):
        self.calls.append((prompt, answer, spans))
        hits = [1.0 if self.word in prompt[a:b] else 0.0 for a, b in spans]
        total = sum(hits) or 1.0
        return _Out([_Span(h / total) for h in hits])


def _result():
    pipe = MedicalPipeline(use_embeddings=False)
    inp = pipe.discover(FIX / "en-appendectomy")[0]
    return pipe.run_documents(pipe.load(inp), "x", question="why was the antibiotic changed?")


def test_prompt_spans_point_at_the_sentences():
    ev = _result().evidence[0]
    prompt, spans = build_prompt(ev.supporting)
    assert len(spans) == len(ev.supporting)
    for (a, b), it in zip(spans, ev.supporting, strict=True):
        assert prompt[a:b] == " ".join(it.span.text.split())


def test_rerank_moves_the_attended_sentence_up():
    result = _result()
    q = result.evidence[0]
    last = q.supporting[-1]
    word = last.span.text.split()[0]
    llm = FakeLLM(word)
    out = rerank([q], llm=llm, weight=0.9)[0]
    assert llm.calls and llm.calls[0][1].strip() == q.claim
    assert out.supporting[0].span == last.span
    assert out.method.endswith("+engine_attention")
    assert all("engine_share" in it.scores for it in out.supporting)


def test_pipeline_runs_without_the_engine_and_warns_when_it_fails(monkeypatch):
    import pipelines.medical.engine_rerank as er

    def boom():
        raise RuntimeError("no model here")

    monkeypatch.setattr(er, "default_llm", boom)
    pipe = MedicalPipeline(use_embeddings=False, engine_rerank=True)
    inp = pipe.discover(FIX / "en-appendectomy")[0]
    result = pipe.run_documents(pipe.load(inp), "x", question="why was the antibiotic changed?")
    assert any("engine re-ranking skipped" in w for w in result.warnings)
    assert result.evidence and "engine" not in result.evidence[0].method


@pytest.mark.model
@pytest.mark.slow
@pytest.mark.skipif(os.environ.get("LONGDOC_MEDICAL_ENGINE") != "1", reason="opt-in: LONGDOC_MEDICAL_ENGINE=1 (loads Gemma 3 270M)")
def test_rerank_with_the_real_engine():
    pipe = MedicalPipeline(use_embeddings=False, engine_rerank=True)
    inp = pipe.discover(FIX / "en-appendectomy")[0]
    result = pipe.run_documents(pipe.load(inp), "x", question="why was the antibiotic changed?")
    assert not result.warnings
    q = result.evidence[0]
    assert q.method.endswith("+engine_attention")
    assert abs(sum(it.scores["engine_share"] for it in q.supporting + q.contradicting) - 1.0) < 1e-3
    assert "vancomycin" in " ".join(it.span.text for it in q.supporting[:3])
