"""Exactness against transformers on tiny random-weight models of every family (CPU).

Bounds (max |logit difference| over every position and vocabulary entry; logits have std ~1.6-1.9):
  float32: 2e-4 (measured: 0 for llama/qwen2/qwen3, 4.3e-6 gemma3, 6.2e-6 mistral).
  bfloat16 / float16: 0.5 absolute AND at most 1.5x transformers' own rounding noise in that dtype
  (its half-precision logits against its fp32 logits); bf16 measured 0.09-0.38 vs noise 0.10-0.44. The first position (attention
  over a single key) must match to 1e-6: every projection, norm, RoPE and MLP op rounds at the same
  places; the rest comes from scaled_dot_product_attention accumulating in a different order.
Greedy decoding must give identical tokens for 64 new tokens (float32). The reference is a greedy
loop over transformers' full forward (the model's definition): transformers 5.24's `generate` on the
tiny Gemma 3 (window 8) picks a token that is not the argmax of its own forward over the same tokens
once the sequence passes the window (token 7 of 64, with or without use_cache), while the engine
agrees with the forward.
"""

from __future__ import annotations

import pytest
import torch

from engine import LLM, CacheConfig, SamplingParams, SchedulerConfig
from tests.engine.tiny_models import FAMILIES, VOCAB

FP32_BOUND = 2e-4
BF16_BOUND = 0.5


def make_llm(folder, dtype="float32", chunk=1024, block=4, **kw) -> LLM:
    # K/V pages in the model's dtype: these tests hold the engine's arithmetic to transformers' (the
    # CPU's default half pages move logits by their rounding: tests/engine/kv/test_kv_dtype.py)
    kw.setdefault("kv_dtype", dtype)
    cache = CacheConfig(block_size=block, memory_budget=64 * 2**20, **kw)
    return LLM(model=folder, device="cpu", dtype=dtype, cache=cache,
               scheduler=SchedulerConfig(max_model_len=512, max_prefill_chunk=chunk))


def prompt(n: int, seed: int = 1) -> list[int]:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, VOCAB, (n,), generator=g).tolist()


@pytest.mark.parametrize("family", FAMILIES)
def test_logits_match_transformers_fp32(tiny_folders, family):
    folder, hf = tiny_folders[family]
    ids = prompt(40)
    with torch.no_grad():
        ref = hf(torch.tensor([ids])).logits[0].float()
    mine = make_llm(folder).prompt_logits(ids)
    diff = (mine - ref).abs().max().item()
    assert diff < FP32_BOUND, f"{family}: max |diff| {diff}"


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("family", ["gemma3", "llama"])
def test_logits_match_transformers_half(tiny_folders, family, dtype):
    folder, hf = tiny_folders[family]
    ids = prompt(40)
    hf16 = type(hf)(hf.config).eval()
    hf16.load_state_dict(hf.state_dict())
    hf16 = hf16.to(getattr(torch, dtype))
    with torch.no_grad():
        ref = hf16(torch.tensor([ids])).logits[0].float()
        ref32 = hf(torch.tensor([ids])).logits[0].float()
    mine = make_llm(folder, dtype=dtype).prompt_logits(ids)
    diff = (mine - ref).abs().max().item()
    noise = (ref - ref32).abs().max().item()
    assert diff < BF16_BOUND and diff <= 1.5 * noise, f"{family}: max |diff| {diff}, transformers' bf16 noise {noise}"
    assert (mine[0] - ref[0]).abs().max().item() < 1e-6
    assert (mine.argmax(-1) == ref.argmax(-1)).float().mean() > 0.9


@pytest.mark.parametrize("family", FAMILIES)
def test_greedy_64_tokens_match_transformers(tiny_folders, family):
    folder, hf = tiny_folders[family]
    ids = prompt(12, seed=3)
    seq = list(ids)
    with torch.no_grad():
        for _ in range(64):
            seq.append(int(hf(torch.tensor([seq])).logits[0, -1].argmax()))
    ref = seq[len(ids) :]
    out = make_llm(folder).generate([ids], SamplingParams(max_tokens=64))[0]
    assert len(out.token_ids) == 64
    assert out.token_ids == ref


@pytest.mark.parametrize("family", ["gemma3", "llama", "mistral"])
def test_chunked_prefill_equals_one_shot(tiny_folders, family):
    folder, _ = tiny_folders[family]
    ids = prompt(45, seed=5)
    llm = make_llm(folder)
    one_shot = llm.prompt_logits(ids)
    for chunk in (1, 3, 8, 17):
        chunked = llm.prompt_logits(ids, chunk=chunk)
        diff = (chunked - one_shot).abs().max().item()
        assert diff < 1e-4, f"{family}: chunk {chunk}: max |diff| {diff}"
    assert all(g.allocator.num_free == g.num_blocks for g in llm.kv.groups), "blocks leaked"


@pytest.mark.parametrize("family", ["gemma3", "qwen2"])
def test_batch_equals_one_by_one(tiny_folders, family):
    folder, _ = tiny_folders[family]
    prompts = [prompt(5, 7), prompt(19, 8), prompt(33, 9)]
    llm = make_llm(folder, chunk=16)
    greedy = SamplingParams(max_tokens=24)
    sampled = SamplingParams(max_tokens=24, temperature=0.8, top_p=0.9, top_k=40, seed=1234)
    for params in (greedy, sampled):
        batch = llm.generate(prompts, params)
        alone = [llm.generate([p], params)[0] for p in prompts]
        assert [b.token_ids for b in batch] == [a.token_ids for a in alone]
    assert all(g.allocator.num_free == g.num_blocks for g in llm.kv.groups), "blocks leaked"


def test_small_cache_runs_batch_in_turns(tiny_folders):
    """With room for only one sequence at a time, a batch still completes, one after another."""
    folder, _ = tiny_folders["llama"]
    prompts = [prompt(30, 11), prompt(30, 12)]
    big = make_llm(folder).generate(prompts, SamplingParams(max_tokens=20))
    tiny_budget = 2 * 4 * 2 * 16 * 4 * 4 * (50 // 4 + 1)  # ~one 50-token sequence: K+V, 4 layers, fp32
    small = LLM(model=folder, device="cpu", dtype="float32",
                cache=CacheConfig(block_size=4, memory_budget=tiny_budget, kv_dtype="float32"), max_model_len=512)
    assert small.kv.groups[0].num_blocks < 2 * 13
    out = small.generate(prompts, SamplingParams(max_tokens=20))
    assert [o.token_ids for o in out] == [b.token_ids for b in big]
