"""Megatron-style slicing of a model's weights for one tensor-parallel rank.

Attention: q/k/v projections are column-parallel by heads (rank r keeps query heads
r*H/W..(r+1)*H/W and the KV heads they read; with fewer KV heads than ranks, each rank a copy of
its one KV head, as vLLM does), o_proj row-parallel (the matching input columns).
MLP: gate and up column-parallel, down row-parallel. Each row-parallel product is a partial sum
that one all-reduce completes (after attention, after the MLP: engine.model.layers). Embedding and
output layer are vocabulary-parallel: rank r holds rows vocab_bounds(V, W)[r]; a lookup is zero
outside the slice and summed over the ranks, the logits are gathered (engine.model.decoder).
Norms, RoPE and Gemma's q/k norms (per head dim) are replicated.
"""

from __future__ import annotations

import dataclasses
import math

import torch

from engine.errors import ModelLoadError
from engine.model.config import ModelConfig


def check_splittable(config: ModelConfig, world: int) -> None:
    """ModelLoadError unless `config` splits over `world` ranks: heads and MLP width divide by it,
    and the KV heads either divide by it or divide it (fewer KV heads than ranks: each rank keeps a
    copy of the one its query heads read)."""
    for what, n in (("attention heads", config.num_heads), ("MLP width (intermediate_size)", config.intermediate_size)):
        if n % world:
            raise ModelLoadError(f"tensor_parallel_size={world} does not divide the model's {n} {what}")
    kv = config.num_kv_heads
    if kv % world and world % kv:
        raise ModelLoadError(f"tensor_parallel_size={world} and the model's {kv} KV heads: one must divide the other")


def local_kv_heads(config: ModelConfig, world: int) -> int:
    return max(1, config.num_kv_heads // world)


def kv_head_range(config: ModelConfig, rank: int, world: int) -> tuple[int, int]:
    """The KV heads rank `rank` keeps: its share, or (fewer KV heads than ranks) the one its query
    heads read, replicated on world / num_kv_heads ranks."""
    kv = config.num_kv_heads
    if kv >= world:
        per = kv // world
        return rank * per, (rank + 1) * per
    first = rank * (config.num_heads // world) // (config.num_heads // kv)  # the group of its first query head
    return first, first + 1


def vocab_bounds(vocab: int, world: int) -> list[tuple[int, int]]:
    """Each rank's [lo, hi) rows of a vocabulary of `vocab` (the last slice may be shorter)."""
    per = math.ceil(vocab / world)
    return [(min(r * per, vocab), min((r + 1) * per, vocab)) for r in range(world)]


def local_config(config: ModelConfig, rank: int, world: int) -> ModelConfig:
    """The model config of rank `rank`'s shard: its heads, KV heads, MLP width and vocabulary slice."""
    lo, hi = vocab_bounds(config.vocab_size, world)[rank]
    return dataclasses.replace(config, num_heads=config.num_heads // world, num_kv_heads=local_kv_heads(config, world),
                               intermediate_size=config.intermediate_size // world, vocab_size=hi - lo)


def shard_tensors(tensors: dict[str, torch.Tensor], config: ModelConfig, rank: int, world: int) -> dict[str, torch.Tensor]:
    """Rank `rank`'s slices of a full state dict (HF names); replicated tensors are passed through."""
    d = config.head_dim
    q_rows = config.num_heads // world * d
    kv_lo, kv_hi = kv_head_range(config, rank, world)
    f = config.intermediate_size // world
    lo, hi = vocab_bounds(config.vocab_size, world)[rank]

    def rows(t: torch.Tensor, n: int) -> torch.Tensor:
        return t[rank * n : (rank + 1) * n].contiguous()

    out = {}
    for name, t in tensors.items():
        if name.endswith(("self_attn.q_proj.weight", "self_attn.q_proj.bias")):
            t = rows(t, q_rows)
        elif name.endswith(("self_attn.k_proj.weight", "self_attn.k_proj.bias", "self_attn.v_proj.weight",
                            "self_attn.v_proj.bias")):
            t = t[kv_lo * d : kv_hi * d].contiguous()
        elif name.endswith("self_attn.o_proj.weight"):
            t = t[:, rank * q_rows : (rank + 1) * q_rows].contiguous()
        elif name.endswith(("mlp.gate_proj.weight", "mlp.up_proj.weight")):
            t = rows(t, f)
        elif name.endswith("mlp.down_proj.weight"):
            t = t[:, rank * f : (rank + 1) * f].contiguous()
        elif name in ("model.embed_tokens.weight", "lm_head.weight"):
            t = t[lo:hi].contiguous()
        out[name] = t
    return out
