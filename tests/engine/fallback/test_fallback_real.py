"""The fallback on the real default model at a 1K context (Gemma 3 270M, CPU, float32): a ~2.5K-token
patent text and a question through `truncate:middle` and `retrieval` give a non-empty answer, and
the report says what was dropped (the issue saw empty answers there; they did not reproduce on
whole documents, see the report of the change that added this test)."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine import LLM, CacheConfig, LongRequest, SamplingParams
from engine.fallback import FallbackPolicy

pytestmark = pytest.mark.model

ROOT = Path(__file__).resolve().parents[3]
INSTRUCTIONS = "Read the document and answer the question after it.\n\nDocument:\n"
QUESTION = "\n\nQuestion: What does the invention relate to?\nAnswer:"


@pytest.fixture(scope="module")
def llm_1k():
    return LLM(device="cpu", dtype="float32", cache=CacheConfig(memory_budget=64 * 2**20), max_model_len=1024)


@pytest.mark.parametrize("spec", ["truncate:middle", "retrieval"])
def test_fallback_at_1k_answers_and_reports_what_was_dropped(llm_1k, spec):
    from pipelines.text.fallback_tools import PipelineTextTools

    text = (ROOT / "data" / "samples" / "patents" / "US7643973.txt").read_text()
    n_doc = len(llm_1k.encode(text, add_special_tokens=False))
    assert 2000 < n_doc < 4000
    strategy, _, side = spec.partition(":")
    params = SamplingParams(max_tokens=128, stop=["\nQuestion:"])
    out, rep = llm_1k.generate_long(LongRequest(document=text, question=QUESTION, instructions=INSTRUCTIONS), params,
                                    FallbackPolicy(strategy=strategy, truncate_side=side or "middle"),
                                    text_tools=PipelineTextTools())
    assert out.text.strip(), (out.text, out.token_ids[:8], out.finish_reason)
    assert rep.fallback_triggered and rep.reason == "context"
    assert rep.document_tokens == n_doc and rep.tokens_dropped > 0 and rep.kept_tokens + rep.tokens_dropped == n_doc
    assert rep.prompt_tokens_sent[0] <= rep.budget_tokens == 1024 - 128
    assert rep.prompt_tokens_sent[0] >= rep.budget_tokens - 64  # the room is used, not left empty
    assert rep.kept_spans and all(0 <= a < b <= len(text) for a, b in rep.kept_spans)
    decoded = llm_1k.decode(out.prompt_token_ids, False)
    assert decoded.endswith(QUESTION)  # the question reached the model whole
    if strategy == "retrieval":
        assert rep.chunks_used >= 2 and rep.chunks_total > rep.chunks_used and rep.retrieval_method
    else:
        assert rep.truncate_side == "middle" and len(rep.kept_token_spans) == 2
