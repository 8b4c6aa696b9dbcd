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
