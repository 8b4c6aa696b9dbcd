"""One engine configuration: frozen parts, resolved by `LLM` into its own copy, never written into
a caller's objects."""

from __future__ import annotations

import dataclasses

import pytest

from engine import LLM, CacheConfig, EngineConfig, EngineError, LoadConfig, SchedulerConfig


def test_config_parts_are_frozen():
    for cfg, field in ((CacheConfig(), "block_size"), (SchedulerConfig(), "max_model_len"),
                       (LoadConfig(), "device"), (EngineConfig(), "cache")):
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(cfg, field, None)


def test_llm_resolves_its_own_copy_and_leaves_the_callers_alone(tiny_folders):
    folder, _ = tiny_folders["llama"]
    cache = CacheConfig(block_size=4, memory_budget=2**22)
    sched = SchedulerConfig(max_prefill_chunk=8)
    llm = LLM(model=folder, device="cpu", dtype="float32", cache=cache, scheduler=sched)
    assert sched.max_model_len is None  # not written back
    assert llm.scheduler_config.max_model_len == llm.max_model_len == llm.config.max_position_embeddings
    assert llm.cache_config is cache and llm.scheduler_config.max_prefill_chunk == 8
    ids = list(range(3, 30))
    assert llm.prompt_logits(ids, chunk=4).shape[0] == len(ids)  # another chunk for this call only
    assert llm.scheduler_config.max_prefill_chunk == 8 and llm.core.chunk == 8
    same = LLM(config=EngineConfig(LoadConfig(folder, "cpu", "float32"), cache, sched))
    assert same.engine_config == dataclasses.replace(llm.engine_config, load=same.engine_config.load)
    with pytest.raises(EngineError, match="not both"):
        LLM(model=folder, config=EngineConfig())


def _shape(layers, hidden, inter, heads, kv_heads, head_dim):
    from engine.model.config import ModelConfig
    from engine.model.rope import RopeConfig

    return ModelConfig(
        architecture="llama", vocab_size=1000, hidden_size=hidden, intermediate_size=inter, num_layers=layers,
        num_heads=heads, num_kv_heads=kv_heads, head_dim=head_dim, rms_norm_eps=1e-6, max_position_embeddings=4096,
        layer_windows=[None] * layers, layer_ropes=[RopeConfig()] * layers, attn_scale=head_dim**-0.5,
        tie_word_embeddings=False,
    )


def test_auto_prefill_chunk_from_the_model_and_the_memory():
    """On CUDA a chunk left open is sized from the model (one chunk's matmuls within the step
    bound) and the memory left after the KV pool; set, it is kept; off CUDA it is 1,024."""
    import torch

    from engine.config import CacheConfig, SchedulerConfig
    from engine.core.scheduler import auto_prefill_chunk, resolve_prefill_chunk

    llama8b = _shape(32, 4096, 14336, 32, 8, 128)
    gemma270m = _shape(18, 640, 2048, 4, 1, 256)
    free = 120 * 2**30  # an H200 after the 8B weights
    assert auto_prefill_chunk(llama8b, free, free // 4, 2) == 16384  # bound by the step's matmul FLOPs
    assert auto_prefill_chunk(gemma270m, free, free // 4, 2) == 32768  # the cap
    assert auto_prefill_chunk(llama8b, 2 * 2**30, 2**30, 2) == 2048  # bound by the memory left after the KV pool
    assert auto_prefill_chunk(gemma270m, free, free // 4, 2, max_batched=5000) == 4096
    assert auto_prefill_chunk(llama8b, 2**20, 2**20, 2) == 1024  # never below the CPU default
    cache = CacheConfig()
    assert resolve_prefill_chunk(SchedulerConfig(), cache, gemma270m, torch.device("cpu"), 4) == 1024
    assert resolve_prefill_chunk(SchedulerConfig(max_prefill_chunk=256), cache, gemma270m, torch.device("cuda"), 2) == 256
    assert SchedulerConfig().prefill_chunk == 1024
