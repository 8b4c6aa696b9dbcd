"""Preemption on the real default model (Gemma 3 270M, CPU, float32): a KV budget too small for the
running sequences' growth forces the scheduler to preempt mid-decode, by swap and by recompute, and
every request still gets exactly the tokens it gets alone.

The budget: max_model_len 128 sizes the sliding-window pool for one full sequence (8 blocks of 16
tokens; the global pool gets the rest, 10 blocks). Three prompts of ~10 tokens are all admitted
(1 block each, under the watermark), then each grows to 4 blocks at 50 tokens: 12 blocks > 8, so
the newest running sequence is preempted while the others decode."""

from __future__ import annotations

import pytest

from engine import LLM, CacheConfig, SamplingParams, SchedulerConfig

pytestmark = pytest.mark.model

PROMPTS = ["The history of the city of Paris begins", "The river that flows through Rome is",
           "In the winter of 1848, the people of Berlin"]
PARAMS = SamplingParams(max_tokens=40, ignore_eos=True)


@pytest.fixture(scope="module")
def alone(gemma_llm):
    return [gemma_llm.generate([p], PARAMS)[0].token_ids for p in PROMPTS]


@pytest.mark.parametrize("mode", ["swap", "recompute"])
def test_real_model_preempts_mid_decode_and_keeps_every_token(alone, mode):
    llm = LLM(device="cpu", dtype="float32", cache=CacheConfig(memory_budget=5_000_000, kv_dtype="float32"),
              scheduler=SchedulerConfig(max_num_seqs=3, max_model_len=128, preemption=mode))
    blocks = [g.num_blocks for g in llm.kv.groups]
    assert blocks == [10, 8], blocks  # the budget this test is built on (see the module docstring)
    out = llm.generate(PROMPTS, PARAMS)
    c = llm.sched_counters
    assert (c.preempted_swap > 0) == (mode == "swap") and (c.preempted_recompute > 0) == (mode == "recompute")
    assert c.preempted_swap + c.preempted_recompute > 0
    if mode == "swap":
        assert c.swapped_in == c.preempted_swap and c.swap_bytes_out > 0
    assert [o.token_ids for o in out] == alone
    assert all(len(o.token_ids) == 40 for o in out)
    assert all(g.allocator.num_free == g.num_blocks for g in llm.kv.groups)
