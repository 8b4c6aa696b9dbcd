"""The KV pool's default size: max_num_seqs full contexts, capped at a quarter of the free memory,
but never below one full context while that fits in half (a lone full-length prompt runs with the
defaults wherever the device can hold it)."""

from __future__ import annotations

import torch

from engine.kv.paged_cache import PagedKVCache, default_kv_budget

GB = 10**9


def test_default_budget_rules():
    # small contexts: every sequence's full context, well under a quarter
    assert default_kv_budget(1 * GB, 4, 100 * GB) == 4 * GB
    # many sequences: capped at a quarter
    assert default_kv_budget(10 * GB, 16, 100 * GB) == 25 * GB
    # one full context above a quarter but within half: the whole context (the 8B shape at 128K, H100)
    assert default_kv_budget(int(17.2 * GB), 16, int(56.7 * GB)) == int(17.2 * GB)
    # one full context past half: half, never more
    assert default_kv_budget(40 * GB, 1, 60 * GB) == 30 * GB


def test_pool_holds_one_full_context_past_a_quarter(monkeypatch):
    """PagedKVCache with memory_budget None sizes its pool by default_kv_budget: a free memory of
    2.5 full contexts (a quarter of it is less than one) still gives a pool for one whole
    max_model_len sequence."""
    from engine.config import CacheConfig, SchedulerConfig
    from engine.model.loader.random_weights import hf_to_engine_config
    from tests.engine.tiny_models import tiny_hf_config

    cfg = hf_to_engine_config(tiny_hf_config("llama"))
    sched = SchedulerConfig(max_num_seqs=8, max_model_len=4096)
    per_token = 2 * cfg.num_layers * cfg.num_kv_heads * cfg.head_dim * 4
    free = int(2.5 * 4096 * per_token)
    monkeypatch.setattr("engine.kv.paged_cache.free_memory_bytes", lambda device: free)
    kv = PagedKVCache(cfg, CacheConfig(block_size=16), torch.device("cpu"), torch.float32, sched)
    assert kv.groups[0].num_blocks * 16 >= 4096  # one full context fits
    assert kv.bytes <= free // 2
    monkeypatch.setattr("engine.kv.paged_cache.free_memory_bytes", lambda device: 40 * 4096 * per_token)
    kv = PagedKVCache(cfg, CacheConfig(block_size=16), torch.device("cpu"), torch.float32, sched)
    assert kv.groups[0].num_blocks * 16 == 8 * 4096  # max_num_seqs contexts, under a quarter
