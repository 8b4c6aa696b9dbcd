"""The CPU attention path that norms and rotates q and k together (`Attention._forward_cpu`) gives
the separate path's logits and tokens bit for bit: tiny Gemma 3 (q/k norms, two RoPEs, sliding
windows), Llama and Qwen 3 (q/k norms), float32, a prefill and decode steps, one and two threads.
The rolled RoPE equals the rotate-half one on its own too."""

from __future__ import annotations

import pytest
import torch

from engine.model.layers import Attention
from engine.model.rope import apply_rope, apply_rope_rolled


def test_rolled_rope_equals_rotate_half():
    gen = torch.Generator().manual_seed(0)
    for t, heads, d in ((1, 5, 256), (7, 3, 64), (33, 9, 128)):
        x = torch.randn(t, heads, d, generator=gen)
        cos, sin = torch.randn(t, d, generator=gen), torch.randn(t, d, generator=gen)
        assert torch.equal(apply_rope_rolled(x, cos, sin), apply_rope(x, cos, sin))
        # a second pair of the same shape is not confused with the cached one
        cos2, sin2 = torch.randn(t, d, generator=gen), torch.randn(t, d, generator=gen)
        assert torch.equal(apply_rope_rolled(x, cos2, sin2), apply_rope(x, cos2, sin2))


@pytest.mark.parametrize("family", ["gemma3", "llama", "qwen3"])
@pytest.mark.parametrize("threads", [1, 2])
def test_joint_cpu_path_equals_separate_path(family, threads, monkeypatch):
    from engine.config import CacheConfig, SchedulerConfig
    from engine.core.sampling import SamplingParams
    from engine.model.loader.random_weights import hf_to_engine_config, llm_from_model, random_model
    from tests.engine.tiny_models import tiny_hf_config

    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        cfg = hf_to_engine_config(tiny_hf_config(family))
        model = random_model(cfg, torch.device("cpu"), torch.float32, seed=3)
        gen = torch.Generator().manual_seed(2)
        prompts = [torch.randint(3, cfg.vocab_size, (n,), generator=gen).tolist() for n in (37, 5)]
        params = SamplingParams(max_tokens=6, ignore_eos=True)
        got = {}
        for joint in (True, False):
            monkeypatch.setattr(Attention, "cpu_joint", joint)
            llm = llm_from_model(model, cfg, device="cpu", dtype=torch.float32,
                                 cache=CacheConfig(block_size=4, memory_budget=16 * 2**20),
                                 scheduler=SchedulerConfig(max_num_seqs=2, max_prefill_chunk=16))
            got[joint] = ([o.token_ids for o in llm.generate(prompts, params)], llm.prompt_logits(prompts[0], last=37))
        assert got[True][0] == got[False][0]
        assert torch.equal(got[True][1], got[False][1])
    finally:
        torch.set_num_threads(before)
