"""The paged KV cache manager: one block pool per group of layers with the same attention span, a
block table per sequence in each pool, and the operations on those tables (slot allocation,
sliding-window release, freeing, capacity and byte counts).

Two tiers live on the device. Hot: full-precision blocks, always the attention sinks (the first
`sink_tokens`) and the recent `hot_window` tokens. Warm (with `CacheConfig.warm_budget`): older
full blocks in INT8, moved by `demote` (engine.kv.warm_tier, which `PagedKVCache` is built on).

Layers are grouped by their sliding window (Gemma 3: one group of global layers, one of 512-token
sliding layers). Each group has its own pool tensor [layers_in_group, num_blocks, block_size,
kv_heads, head_dim] for K and for V, its own allocator (engine.kv.block_pool), and each sequence
its own block table in that group. A sliding group frees the blocks its window can no longer see,
so its need per sequence is bounded by (window + prefill chunk) whatever the context length.
"""

from __future__ import annotations

import math
import os

import torch

from engine.config import CacheConfig, SchedulerConfig
from engine.errors import CacheFullError
from engine.kv.block_pool import BlockAllocator, CacheGroup
from engine.kv.tier_copy import TierCopier
from engine.kv.warm_tier import WarmTier
from engine.model.config import ModelConfig


def free_memory_bytes(device: torch.device) -> int:
    """Free memory of `device` (CUDA: mem_get_info; CPU: MemAvailable from /proc/meminfo)."""
    if device.type == "cuda":
        return int(torch.cuda.mem_get_info(device)[0])
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES"))


def default_kv_budget(seq_bytes: int, max_num_seqs: int, free: int) -> int:
    """The KV pool's bytes when `CacheConfig.memory_budget` is None: enough for `max_num_seqs` full
    contexts of `seq_bytes` each, capped at a quarter of the free memory, but never below one full
    context while that fits in half of it. So a lone prompt of the model's full length runs with
    the defaults wherever the device can hold it (the Llama-3-8B shape at 128K on an 80 GB H100
    needs 17.2 GB of KV; a quarter of the free memory held 108K tokens, 2026-12-06), and the other
    half stays for activations and whatever else the process holds."""
    cap = max(int(0.25 * free), min(seq_bytes, int(0.5 * free)))
    return min(seq_bytes * max_num_seqs, cap)


KV_DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


def resolve_kv_dtype(kv_dtype: str | None, device: torch.device, dtype: torch.dtype) -> torch.dtype:
    """The hot pool's dtype for `CacheConfig.kv_dtype` on `device` with a model computing in `dtype`."""
    if kv_dtype is not None:
        if kv_dtype not in KV_DTYPES:
            raise ValueError(f"CacheConfig.kv_dtype must be one of {sorted(KV_DTYPES)} or None, not {kv_dtype!r}")
        if torch.device(device).type != "cpu" and KV_DTYPES[kv_dtype] != dtype:
            raise ValueError(f"CacheConfig.kv_dtype {kv_dtype} differs from the model's {dtype}: only the CPU path "
                             "reads pages of another dtype")
        return KV_DTYPES[kv_dtype]
    if torch.device(device).type == "cpu" and dtype == torch.float32:
        from longdoc_kernels import cpu

        if cpu.kv_f16():  # the C kernels read and write half pages here
            return torch.float16
    return dtype


class PagedKVCache(WarmTier):
    """Block pools for every layer group, and the operations on a sequence's block tables."""

    """`scheduler` gives the sequence limits the pools are sized for (max_num_seqs, max_model_len,
    max_prefill_chunk; None: the defaults)."""

    def __init__(self, config: ModelConfig, cache: CacheConfig, device: torch.device, dtype: torch.dtype,
                 scheduler: SchedulerConfig | None = None) -> None:
        limits = scheduler or SchedulerConfig()
        self.block_size = cache.block_size
        self.device = torch.device(device)
        self.copier = TierCopier(device)  # device <-> host block copies (a side stream on CUDA)
        self.chunk = limits.prefill_chunk
        self.max_num_seqs = limits.max_num_seqs
        self.max_model_len = limits.max_model_len or config.max_position_embeddings
        dtype = resolve_kv_dtype(cache.kv_dtype, self.device, dtype)
        self.dtype = dtype  # the hot pools' (CacheConfig.kv_dtype)
        windows = sorted({w for w in config.layer_windows}, key=lambda w: (w is not None, w or 0))
        layer_lists = [[i for i, w in enumerate(config.layer_windows) if w == win] for win in windows]
        elem = torch.tensor([], dtype=dtype).element_size()
        per_block_layer = 2 * self.block_size * config.num_kv_heads * config.head_dim * elem
        # Blocks one full-length sequence needs in each group, and its bytes.
        need = [
            (
                math.ceil(self.max_model_len / self.block_size)
                if w is None
                else min(
                    math.ceil(self.max_model_len / self.block_size),
                    math.ceil((w + self.chunk) / self.block_size) + 1,
                )
            )
            for w in windows
        ]
        group_bytes = [n * len(ls) * per_block_layer for n, ls in zip(need, layer_lists, strict=True)]
        seq_bytes = sum(group_bytes)
        budget = cache.memory_budget
        if budget is None:
            budget_bytes = default_kv_budget(seq_bytes, self.max_num_seqs, free_memory_bytes(device))
        elif isinstance(budget, float) and budget <= 1.0:
            budget_bytes = int(budget * free_memory_bytes(device))
        else:
            budget_bytes = int(budget)
        self.budget_bytes = budget_bytes  # resolved: tensor-parallel ranks size their pools from rank 0's
        self.ops: list[tuple] | None = None  # rank 0 of a tensor-parallel engine: recorded KV data operations
        # Sliding pools first: their need per sequence is bounded, so give them room for as many
        # sequences as may run (but at most half the budget); the global pool takes the rest.
        sliding_seq = sum(b for b, w in zip(group_bytes, windows, strict=True) if w is not None)
        n_sliding = self.max_num_seqs
        while n_sliding > 1 and n_sliding * sliding_seq > budget_bytes // 2:
            n_sliding -= 1
        rest = budget_bytes - n_sliding * sliding_seq
        global_layers = sum(len(ls) for w, ls in zip(windows, layer_lists, strict=True) if w is None)
        if rest <= 0 or (global_layers and rest < global_layers * per_block_layer):
            raise CacheFullError(
                f"KV cache budget of {budget_bytes} bytes is too small for this model (needs more than "
                f"{n_sliding * sliding_seq + global_layers * per_block_layer} bytes)"
            )
        blocks = [
            n * n_sliding if w is not None else rest // (global_layers * per_block_layer)
            for w, n in zip(windows, need, strict=True)
        ]
        self.groups: list[CacheGroup] = []
        self.layer_slot: dict[int, tuple[int, int]] = {}
        for gi, (w, ls, nb) in enumerate(zip(windows, layer_lists, blocks, strict=True)):
            shape = (len(ls), nb, self.block_size, config.num_kv_heads, config.head_dim)
            # empty, not zeros: pages are touched only when used (a backend never reads unwritten
            # slots unmasked; see TorchAttentionBackend.decode)
            k = torch.empty(shape, dtype=dtype, device=device)
            v = torch.empty(shape, dtype=dtype, device=device)
            self.groups.append(CacheGroup(w, ls, nb, BlockAllocator(nb), k, v))
            for j, layer in enumerate(ls):
                self.layer_slot[layer] = (gi, j)
        self.bytes = sum(g.k.numel() * 2 * elem for g in self.groups)
        self._init_warm(config, cache, device)

    def _decref_entry(self, g: CacheGroup, e: int) -> None:
        if e >= 0:
            g.allocator.decref(e)
        elif e <= -2:
            g.warm.allocator.decref(-e - 2)

    # --- counters --------------------------------------------------------------------------------
    def blocks_per_tier(self) -> dict[str, list[int]]:
        """Blocks in use and in total per tier, one list entry per group (warm 0/0 without a pool)."""
        return {
            "hot_used": [g.num_blocks - g.allocator.num_free for g in self.groups],
            "hot_total": [g.num_blocks for g in self.groups],
            "warm_used": [g.warm.num_blocks - g.warm.allocator.num_free if g.warm else 0 for g in self.groups],
            "warm_total": [g.warm.num_blocks if g.warm else 0 for g in self.groups],
        }

    def kv_bytes(self, tables: list[list[int]], hot_elem_size: int | None = None) -> dict[str, int]:
        """Bytes of KV that a sequence's block tables hold: {"hot", "warm", "total"}, over all layers.
        `hot_elem_size` counts hot blocks as if the pool had that element size (2: bf16)."""
        elem = hot_elem_size or self.groups[0].k.element_size()
        hot = warm = 0
        for g, table in zip(self.groups, tables, strict=True):
            per_hot = 2 * self.block_size * g.k.shape[3] * g.k.shape[4] * elem * len(g.layers)
            hot += sum(1 for e in table if e >= 0) * per_hot
            warm += sum(1 for e in table if e <= -2) * self.warm_block_layer_bytes * len(g.layers)
        return {"hot": hot, "warm": warm, "total": hot + warm}

    def kv_bytes_per_token(self, tables: list[list[int]], num_tokens: int, hot_elem_size: int | None = None) -> float:
        """KV bytes a sequence of `num_tokens` cached tokens holds, per token (see `kv_bytes`)."""
        return self.kv_bytes(tables, hot_elem_size)["total"] / max(1, num_tokens)

    # --- per layer -------------------------------------------------------------------------------
    def layer_cache(self, layer: int) -> tuple[int, torch.Tensor, torch.Tensor]:
        """(group index, K pool, V pool) of a layer; pools are [num_blocks, block_size, kv_heads, head_dim]."""
        gi, j = self.layer_slot[layer]
        g = self.groups[gi]
        return gi, g.k[j], g.v[j]

    # --- capacity --------------------------------------------------------------------------------
    def max_tokens_per_seq(self) -> int:
        """The longest sequence the global pool can hold on its own."""
        g = self.groups[0]
        if g.window is None:
            return min(self.max_model_len, g.num_blocks * self.block_size)
        return self.max_model_len

    def blocks_needed(self, tokens: int) -> list[int]:
        """Blocks per group that a sequence of `tokens` tokens may hold at its peak."""
        return [g.blocks_per_seq(tokens, self.block_size, self.chunk) for g in self.groups]

    def num_free(self) -> list[int]:
        return [g.allocator.num_free for g in self.groups]

    # --- block tables ----------------------------------------------------------------------------
    def new_tables(self) -> list[list[int]]:
        return [[] for _ in self.groups]

    def allocate_slots(self, tables: list[list[int]], start: int, count: int) -> list[torch.Tensor]:
        """Make room for tokens start..start+count-1 of a sequence; return their slot ids per group."""
        bs = self.block_size
        b0, end_blocks = start // bs, (start + count + bs - 1) // bs
        slots = []
        offsets = torch.arange(bs)
        for g, table in zip(self.groups, tables, strict=True):
            if len(table) < end_blocks:
                table += g.allocator.allocate_many(end_blocks - len(table))
            # every slot of the blocks the tokens fall in, then the tokens' own: a 32K-token chunk's
            # 32K slot ids in ~0.1 ms (indexing the table per token took ~0.5-1.3 ms)
            t = torch.tensor(table[b0:end_blocks], dtype=torch.long)
            slots.append((t[:, None] * bs + offsets).flatten()[start - b0 * bs : start - b0 * bs + count])
        return slots

    def release_out_of_window(self, tables: list[list[int]], num_tokens: int) -> None:
        """Free the blocks that no future query of a sequence of `num_tokens` cached tokens can see."""
        bs = self.block_size
        for g, table in zip(self.groups, tables, strict=True):
            if g.window is None:
                continue
            first_visible = num_tokens - g.window + 1  # the next query is at position num_tokens
            for b in range(min(len(table), max(0, first_visible) // bs)):
                if table[b] != -1:
                    self._decref_entry(g, table[b])
                    table[b] = -1

    def trim(self, tables: list[list[int]], num_tokens: int) -> None:
        """Free the blocks past the first ceil(num_tokens / block_size): a sequence cut back to
        `num_tokens` tokens (rejected draft tokens, engine/core/speculative.py)."""
        keep = (num_tokens + self.block_size - 1) // self.block_size
        for g, table in zip(self.groups, tables, strict=True):
            while len(table) > keep:
                e = table.pop()
                if e != -1:
                    self._decref_entry(g, e)

    def free(self, tables: list[list[int]]) -> None:
        for g, table in zip(self.groups, tables, strict=True):
            for b in table:
                self._decref_entry(g, b)
            table.clear()
