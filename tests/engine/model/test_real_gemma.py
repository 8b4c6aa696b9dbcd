"""The real default model (Gemma 3 270M, Q4_K_M GGUF) against transformers' Gemma3ForCausalLM
holding the same dequantised weights, on CPU in float32.

Bounds: max |logit difference| < 2e-3 on the last 16 positions of a ~700-token prompt prefilled in
chunks of 256 (so sliding-window layers drop blocks; logits have std ~4.5; measured 2.9e-5);
greedy: identical 64 tokens.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from engine import SamplingParams
from tests.engine.tiny_models import hf_gemma_from_engine

pytestmark = pytest.mark.model

REAL_BOUND = 2e-3


@pytest.fixture(scope="session")
def hf_gemma(gemma_llm):
    """transformers' Gemma3ForCausalLM built from the engine's parsed config, sharing its weights."""
    return hf_gemma_from_engine(gemma_llm)


def _text() -> str:
    design = Path(__file__).resolve().parents[3] / "engine" / "__init__.py"
    return design.read_text()


def test_config_from_gguf(gemma_llm):
    c = gemma_llm.config
    assert (c.num_layers, c.hidden_size, c.num_heads, c.num_kv_heads, c.head_dim) == (18, 640, 4, 1, 256)
    assert c.global_layers == [5, 11, 17]
    assert {c.layer_windows[i] for i in c.sliding_layers} == {512}
    assert c.layer_ropes[5].theta == 1_000_000.0 and c.layer_ropes[0].theta == 10_000.0
    assert abs(c.attn_scale - 256**-0.5) < 1e-12


def test_real_logits_match_transformers(gemma_llm, hf_gemma):
    ids = gemma_llm.encode(_text())[:700]
    assert len(ids) == 700
    mine = gemma_llm.prompt_logits(ids, chunk=256, last=16)
    with torch.no_grad():
        ref = hf_gemma(torch.tensor([ids]), logits_to_keep=16).logits[0].float()
    diff = (mine - ref).abs().max().item()
    assert diff < REAL_BOUND, f"max |diff| {diff}"
    assert torch.equal(mine.argmax(-1), ref.argmax(-1))


def test_real_greedy_64_tokens_match_transformers(gemma_llm, hf_gemma):
    ids = gemma_llm.encode("The history of the printing press begins in")
    with torch.no_grad():
        ref = hf_gemma.generate(torch.tensor([ids]), max_new_tokens=64, do_sample=False)[0, len(ids):].tolist()
    out = gemma_llm.generate([ids], SamplingParams(max_tokens=64))[0]
    assert len(out.token_ids) == 64 and len(ref) == 64
    assert out.token_ids == ref
    assert out.text.strip()


def test_real_tokenizer_round_trip(gemma_llm):
    text = "Clause 4.2 — the Supplier shall deliver  goods\nwithin 30 days. 合同条款 émigré"
    ids = gemma_llm.encode(text)
    assert ids[0] == gemma_llm.config.bos_token_id
    assert gemma_llm.tokenizer.decode(ids) == text


def test_real_score_prefers_the_likely_continuation(gemma_llm):
    good = gemma_llm.score("The capital of France is", " Paris")
    bad = gemma_llm.score("The capital of France is", " banana")
    assert len(good.logprobs) == len(good.token_ids) >= 1
    assert all(lp <= 0 for lp in good.logprobs)
    assert good.total > bad.total + 2


def test_real_attribution_points_at_the_evidence(gemma_llm):
    prompt = (
        "Note A: The patient was prescribed metformin for type 2 diabetes.\n"
        "Note B: The patient reports a sprained ankle from playing football.\n"
        "Question: Which medication was prescribed? Answer:"
    )
    a = prompt.index("Note A")
    b = prompt.index("Note B")
    res = gemma_llm.attribute(prompt, " metformin", [(a, b - 1), (b, prompt.index("Question") - 1)])
    assert len(res.spans) == 2
    assert res.spans[0].token_end > res.spans[0].token_start
    assert abs(sum(s.share for s in res.spans) - 1) < 1e-6
    assert 0 < res.spans[0].mass < 1
    assert res.spans[0].share > res.spans[1].share
