"""GreedyHead (engine/model/quant.py): the argmax of an int8 output layer found through an int4
filter equals the argmax of the whole int8 product, the candidates' int8 logits equal the whole
product's bit for bit (what its exactness rests on), and a greedy request on the packaged model
gives the same tokens with and without it."""

from __future__ import annotations

import pytest
import torch

from engine.model.quant import GreedyHead, Int8Weight

pytestmark = pytest.mark.skipif(not hasattr(torch, "_weight_int4pack_mm_for_cpu"), reason="no CPU int4 kernel")


def test_argmax_equals_the_int8_product_and_rows_compute_alike():
    gen = torch.Generator().manual_seed(0)
    w = torch.randn(20000, 256, generator=gen) * 0.05
    w[123] += 0.02  # a few rows close to each other: near-ties the filter must keep
    w[124] = w[123] + 1e-4
    head = Int8Weight(w)
    greedy = GreedyHead(head)
    x = torch.randn(16, 256, generator=gen) * 3
    x[3] = w[123] * 40  # a row whose best tokens nearly tie
    full = head.matmul(x).float()
    assert greedy.argmax(x) == full.argmax(-1).tolist()
    assert 0 < greedy.last_candidates < w.shape[0]  # it filtered, and kept something
    rows = torch.tensor([5, 123, 124, 19999, 7000])
    xb = x.to(torch.bfloat16)
    some = torch._weight_int8pack_mm(xb, head.q[rows].contiguous(), head.scale_bf16[rows].contiguous())
    assert torch.equal(some.float(), full[:, rows])
    for k in range(x.shape[0]):  # one row at a time, as a decode step of one sequence
        assert greedy.argmax(x[k:k + 1]) == [int(full[k].argmax())]


def test_too_many_candidates_take_the_whole_product(monkeypatch):
    """A flat distribution (every row a candidate): the whole int8 product, the same argmax."""
    from engine.model import quant

    gen = torch.Generator().manual_seed(1)
    w = torch.randn(4096, 256, generator=gen) * 0.05
    head = Int8Weight(w)
    greedy = GreedyHead(head)
    x = torch.randn(3, 256, generator=gen) * 1e-3  # logits all near 0: nothing is ruled out
    full = head.matmul(x).float().argmax(-1).tolist()
    calls = []
    real = torch._weight_int8pack_mm
    monkeypatch.setattr(torch, "_weight_int8pack_mm", lambda a, q, s: calls.append(q is head.q) or real(a, q, s))
    assert greedy.argmax(x) == full
    assert greedy.last_candidates * quant.FULL_HEAD_SHARE > w.shape[0] and calls[-1]  # the layer itself, no gather


def test_greedy_generation_is_unchanged_on_the_packaged_model():
    from engine import LLM, SamplingParams

    try:
        llm = LLM(device="cpu")  # the packaged GGUF, int8 weights: the GreedyHead is on
    except Exception as exc:  # noqa: BLE001 - the packaged model is a dependency; say why if absent
        pytest.skip(f"packaged model unavailable: {exc}")
    assert llm.model.greedy_head is not None
    prompts = ["The supplier shall deliver the goods within", "Article 1. Definitions. In this Agreement,"]
    params = SamplingParams(max_tokens=12, ignore_eos=True)
    fast = [o.token_ids for o in llm.generate(prompts, params)]
    head = llm.model.greedy_head
    llm.model.greedy_head = None
    try:
        slow = [o.token_ids for o in llm.generate(prompts, params)]
    finally:
        llm.model.greedy_head = head
    assert fast == slow
