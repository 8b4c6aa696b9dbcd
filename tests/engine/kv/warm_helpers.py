"""Helpers for the warm-tier and sparse-decode tests: a paged KV cache of a made-up model shape,
filled with random keys and values, without loading any model."""

from __future__ import annotations

import torch

from engine.config import CacheConfig, SchedulerConfig
from engine.kv.paged_cache import PagedKVCache
from engine.model.config import ModelConfig
from engine.model.rope import RopeConfig
from longdoc_kernels import reference


def model_config(windows=(None, 8, None), heads: int = 4, kv_heads: int = 2, head_dim: int = 16) -> ModelConfig:
    return ModelConfig(
        architecture="llama", vocab_size=32, hidden_size=heads * head_dim, intermediate_size=32,
        num_layers=len(windows), num_heads=heads, num_kv_heads=kv_heads, head_dim=head_dim, rms_norm_eps=1e-6,
        max_position_embeddings=512, layer_windows=list(windows), layer_ropes=[RopeConfig() for _ in windows],
        attn_scale=head_dim**-0.5,
    )


def warm_budget_for(cfg: ModelConfig, blocks: int, block_size: int = 4) -> int:
    """Bytes that give exactly `blocks` warm blocks to the global layers of `cfg`."""
    per = 2 * block_size * cfg.num_kv_heads * cfg.head_dim + 8 * cfg.num_kv_heads + 2 * cfg.num_kv_heads * cfg.head_dim
    return blocks * per * len(cfg.global_layers)


def make_cache(cfg: ModelConfig | None = None, warm_blocks: int | None = 64, block_size: int = 4,
               dtype: torch.dtype = torch.float32, **kw) -> PagedKVCache:
    cfg = cfg or model_config()
    budget = None if warm_blocks is None else warm_budget_for(cfg, warm_blocks, block_size)
    kw.setdefault("kv_dtype", str(dtype).removeprefix("torch."))  # pools in `dtype`, whatever the CPU's default
    cache = CacheConfig(block_size=block_size, memory_budget=2**22, warm_budget=budget, **kw)
    return PagedKVCache(cfg, cache, torch.device("cpu"), dtype, SchedulerConfig(max_model_len=256, max_prefill_chunk=16))


def fill(kv: PagedKVCache, tables: list[list[int]], start: int, count: int, gen: torch.Generator) -> None:
    """Allocate slots for tokens start..start+count-1 and write random K and V there in every layer
    (keys with a per-channel offset, like real keys, so that blocks differ in their ranges)."""
    slots = kv.allocate_slots(tables, start, count)
    for g, s in zip(kv.groups, slots, strict=True):
        nl, _, bs, kvh, d = g.k.shape
        k = torch.randn(nl, count, kvh, d, generator=gen) + torch.linspace(-2, 2, d)
        v = torch.randn(nl, count, kvh, d, generator=gen)
        g.k.view(nl, -1, kvh, d).index_copy_(1, s, k.to(g.k.dtype))
        g.v.view(nl, -1, kvh, d).index_copy_(1, s, v.to(g.v.dtype))


def layer_kv(kv: PagedKVCache, layer: int, table: list[int], n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Positions 0..n-1 of a layer as float32 [n, kv_heads, head_dim] (warm blocks dequantised)."""
    gi, k_cache, v_cache = kv.layer_cache(layer)
    t = torch.tensor(table, dtype=torch.long)
    w = kv.layer_warm(layer)
    wk = dict(k_cache_int8=w.kq, k_scale=w.ks) if w is not None else {}
    wv = dict(k_cache_int8=w.vq, k_scale=w.vs) if w is not None else {}
    return reference.gather_kv(k_cache, t, n, **wk), reference.gather_kv(v_cache, t, n, **wv)
