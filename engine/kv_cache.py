"""The paged KV cache: fixed-size blocks, a block table per sequence, a free-list allocator with
reference counts, and separate block pools for layers with different attention spans.

Two tiers live on the device. Hot: full-precision blocks, always the attention sinks (the first
`sink_tokens`) and the recent `hot_window` tokens. Warm (with `CacheConfig.warm_budget`): older
full blocks of the global-attention layers, INT8 with a float32 scale per (block, kv head) and
per-block key min/max summaries for sparse decode; `demote` moves them (after every forward, or
with `CacheConfig.demote_watermark` only while the hot pool is fuller than the watermark, and under
block pressure before the scheduler preempts), and attention reads them in place through the block
table (entry <= -2 is warm block -entry - 2; see longdoc_kernels/__init__.py).

Layers are grouped by their sliding window (Gemma 3: one group of global layers, one of 512-token
sliding layers). Each group has its own pool tensor [layers_in_group, num_blocks, block_size,
kv_heads, head_dim] for K and for V, its own allocator, and each sequence its own block table in
that group. A sliding group frees the blocks its window can no longer see, so its need per
sequence is bounded by (window + prefill chunk) whatever the context length.

Reference counts let a block be shared by several sequences (prefix sharing, engine.prefix_cache):
a block returns to the free list when its count reaches zero, keeping its contents until reused.
"""

from __future__ import annotations

import math
import os
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

import torch

from engine.config import ModelConfig
from engine.errors import CacheFullError
from engine.tier_copy import TierCopier
from longdoc_kernels import dispatch


@dataclass
class CacheConfig:
    """How the KV cache is sized.

    memory_budget: bytes (int > 1), or a fraction (0 < float <= 1) of the free device memory (on
    CPU: MemAvailable); None = enough for `max_num_seqs` full contexts, capped at 25% of free memory.
    """

    block_size: int = 16
    memory_budget: int | float | None = None
    max_num_seqs: int = 4
    max_model_len: int | None = None  # None: the model's max_position_embeddings
    max_prefill_chunk: int = 1024
    # Warm tier (INT8 pages read directly by attention); see PagedKVCache.demote.
    warm_budget: int | None = None  # bytes of INT8 warm pages over all groups; None or 0: no warm tier
    hot_window: int = 1024  # most recent tokens kept at full precision
    sink_tokens: int = 16  # first tokens kept at full precision (attention sinks), rounded up to blocks
    # Sliding-window groups get a warm pool too: their in-window blocks older than `hot_window` go
    # INT8 as well (only matters with hot_window < the window; Gemma 3: 15 of 18 layers, window 512).
    warm_sliding: bool = False
    # Demotion policy: None demotes every block outside the sinks and the hot window after each
    # forward; a share w (0 < w <= 1) demotes a sequence's oldest such blocks only while the
    # group's hot pool is more than w full (full precision while memory lasts; sequences are
    # demoted in the order the engine's loop visits them, not globally oldest first), and under
    # block pressure the scheduler demotes before it preempts (`demote(..., force=True)`).
    demote_watermark: float | None = None
    # Quest-style sparse decode: warm blocks kept per query; None: dense. Measured on Gemma 3 270M it
    # loses most needle retrievals (BENCHMARKS.md, "KV cache quality"): an experiment, not a default.
    sparse_top_k: int | None = None
    # Cold tier (engine.block_store, used by engine.prefix_cache): prefixes at chunk boundaries.
    host_cache_bytes: int = 0  # host memory for cold blocks (pinned on CUDA); 0: none
    disk_cache_dir: str | None = None  # on-disk block store (survives restarts); None: none
    disk_cache_bytes: int = 8 * 2**30  # the disk store never grows past this


class BlockAllocator:
    """Free list of block ids with reference counts, in least-recently-freed order.

    A block whose count drops to zero goes to the back of the free list but keeps its contents: the
    prefix cache may still map a hash to it (a "cached-free" block) and `take` it back. `allocate`
    pops from the front, so the block freed longest ago is reused first (LRU eviction of cached
    prefixes); `on_reuse(block)` is called when a block is handed out again, so the prefix cache can
    forget what the block held.
    """

    def __init__(self, num_blocks: int) -> None:
        self.num_blocks = num_blocks
        self.ref_counts = [0] * num_blocks
        self.free: OrderedDict[int, None] = OrderedDict.fromkeys(range(num_blocks))
        self.on_reuse: Callable[[int], None] | None = None

    @property
    def num_free(self) -> int:
        return len(self.free)

    @property
    def num_used(self) -> int:
        return self.num_blocks - len(self.free)

    def allocate(self) -> int:
        if not self.free:
            raise CacheFullError(f"KV cache full: all {self.num_blocks} blocks are in use")
        block, _ = self.free.popitem(last=False)
        self.ref_counts[block] = 1
        if self.on_reuse is not None:
            self.on_reuse(block)
        return block

    def take(self, block: int) -> None:
        """Share `block`: incref it, taking it off the free list if it was cached-free."""
        if self.ref_counts[block] == 0:
            del self.free[block]
        self.ref_counts[block] += 1

    def incref(self, block: int) -> None:
        if self.ref_counts[block] <= 0:
            raise ValueError(f"block {block} is not allocated")
        self.ref_counts[block] += 1

    def decref(self, block: int) -> None:
        if self.ref_counts[block] <= 0:
            raise ValueError(f"block {block} freed twice")
        self.ref_counts[block] -= 1
        if self.ref_counts[block] == 0:
            self.free[block] = None


@dataclass
class WarmPool:
    """The INT8 warm pages of one layer group. Block w of layer j holds K as kq[j, w] * ks[j, w]
    (one float32 scale per kv head: absmax / 127 over the block's tokens and dims), V likewise,
    and the key summaries for sparse decode: kmin/kmax[j, w, h] = the elementwise min / max over
    the block's tokens of the INT8 keys (multiply by ks[j, w, h] for the dequantised keys' bounds;
    kept in INT8 so they cost 2/block_size bytes per token and element, not 8/block_size)."""

    num_blocks: int
    allocator: BlockAllocator
    kq: torch.Tensor  # int8 [layers, num_warm, block_size, kv_heads, head_dim]
    vq: torch.Tensor
    ks: torch.Tensor  # float32 [layers, num_warm, kv_heads]
    vs: torch.Tensor
    kmin: torch.Tensor  # int8 [layers, num_warm, kv_heads, head_dim]
    kmax: torch.Tensor


@dataclass
class WarmPages:
    """One layer's slice of a warm pool, as attention reads it (shapes without the layer axis);
    a block table entry e <= -2 names warm block w = -e - 2."""

    kq: torch.Tensor  # int8 [num_warm, block_size, kv_heads, head_dim]
    vq: torch.Tensor
    ks: torch.Tensor  # float32 [num_warm, kv_heads]
    vs: torch.Tensor
    kmin: torch.Tensor  # int8 [num_warm, kv_heads, head_dim], in units of ks
    kmax: torch.Tensor


def warm_entry(w: int) -> int:
    """Block table entry of warm block w."""
    return -w - 2


@dataclass
class CacheGroup:
    """Layers sharing one attention span, with their block pool (and, for global layers with a warm
    budget, their INT8 warm pool)."""

    window: int | None
    layers: list[int]
    num_blocks: int
    allocator: BlockAllocator
    k: torch.Tensor  # [len(layers), num_blocks, block_size, kv_heads, head_dim]
    v: torch.Tensor
    warm: WarmPool | None = None

    def blocks_per_seq(self, tokens: int, block_size: int, chunk: int) -> int:
        """Blocks one sequence of `tokens` tokens holds at most in this group."""
        if self.window is None:
            return math.ceil(tokens / block_size)
        return min(math.ceil(tokens / block_size), math.ceil((self.window + chunk) / block_size) + 1)


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


class PagedKVCache:
    """Block pools for every layer group, and the operations on a sequence's block tables."""

    def __init__(self, config: ModelConfig, cache: CacheConfig, device: torch.device, dtype: torch.dtype) -> None:
        self.block_size = cache.block_size
        self.device = torch.device(device)
        self.copier = TierCopier(device)  # device <-> host block copies (a side stream on CUDA)
        self.chunk = cache.max_prefill_chunk
        self.max_model_len = cache.max_model_len or config.max_position_embeddings
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
            budget_bytes = min(seq_bytes * cache.max_num_seqs, int(0.25 * free_memory_bytes(device)))
        elif isinstance(budget, float) and budget <= 1.0:
            budget_bytes = int(budget * free_memory_bytes(device))
        else:
            budget_bytes = int(budget)
        # Sliding pools first: their need per sequence is bounded, so give them room for as many
        # sequences as may run (but at most half the budget); the global pool takes the rest.
        sliding_seq = sum(b for b, w in zip(group_bytes, windows, strict=True) if w is not None)
        n_sliding = cache.max_num_seqs
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

    # --- warm tier -------------------------------------------------------------------------------
    def _init_warm(self, config: ModelConfig, cache: CacheConfig, device: torch.device) -> None:
        """Give the global groups an INT8 warm pool from `cache.warm_budget` bytes, and with
        `cache.warm_sliding` the sliding groups too. A sliding group never holds more than its
        window (plus one block) per sequence, so it takes at most that for `max_num_seqs`
        sequences, and at most half the budget; the global groups share the rest."""
        bs = self.block_size
        self.sink_blocks = -(-max(0, cache.sink_tokens) // bs)
        self.hot_window = max(0, cache.hot_window)
        w = cache.demote_watermark
        if w is not None and not 0 < w <= 1:
            raise ValueError(f"demote_watermark must be in (0, 1] or None, not {w!r}")
        self.demote_watermark = w
        self.sparse_top_k = cache.sparse_top_k
        self.warm_bytes = 0
        kvh, d = config.num_kv_heads, config.head_dim
        # per block and layer: int8 K and V, two float32 scales per head, int8 min and max of K
        self.warm_block_layer_bytes = per = 2 * bs * kvh * d + 2 * kvh * 4 + 2 * kvh * d
        if not cache.warm_budget:
            return
        budget = int(cache.warm_budget)
        sizes: dict[int, int] = {}
        sliding = [g for g in self.groups if g.window is not None] if cache.warm_sliding else []
        if sliding:
            want = {id(g): cache.max_num_seqs * (-(-g.window // bs) + 1) for g in sliding}
            cost = sum(want[id(g)] * len(g.layers) * per for g in sliding)
            shrink = min(1.0, (budget // 2) / cost) if cost else 1.0
            for g in sliding:
                sizes[id(g)] = int(want[id(g)] * shrink)
                budget -= sizes[id(g)] * len(g.layers) * per
        glob = [g for g in self.groups if g.window is None]
        layers = sum(len(g.layers) for g in glob)
        for g in glob:
            sizes[id(g)] = budget // (layers * per) if layers else 0
        for g in self.groups:
            n = sizes.get(id(g), 0)
            if n <= 0:
                continue
            nl = len(g.layers)
            g.warm = WarmPool(
                n,
                BlockAllocator(n),
                torch.empty((nl, n, bs, kvh, d), dtype=torch.int8, device=device),
                torch.empty((nl, n, bs, kvh, d), dtype=torch.int8, device=device),
                torch.empty((nl, n, kvh), dtype=torch.float32, device=device),
                torch.empty((nl, n, kvh), dtype=torch.float32, device=device),
                torch.empty((nl, n, kvh, d), dtype=torch.int8, device=device),
                torch.empty((nl, n, kvh, d), dtype=torch.int8, device=device),
            )
            self.warm_bytes += n * nl * per

    def has_warm(self) -> bool:
        """Whether any group has a warm pool."""
        return any(g.warm is not None for g in self.groups)

    def layer_warm(self, layer: int) -> WarmPages | None:
        """The warm pages of `layer` (None when its group has no warm pool)."""
        gi, j = self.layer_slot[layer]
        w = self.groups[gi].warm
        if w is None:
            return None
        return WarmPages(w.kq[j], w.vq[j], w.ks[j], w.vs[j], w.kmin[j], w.kmax[j])

    def demotable(self, table: list[int], num_tokens: int) -> list[int]:
        """Logical blocks of a table that `demote` would move: hot, full, past the sink blocks and
        wholly before the last `hot_window` tokens.

        Demotion always moves the oldest candidates first (a full warm pool or the watermark stops
        it partway, never skips), and released sliding-window entries (-1) are the oldest of their
        table, so between the sinks and the hot window a table reads: released or warm entries,
        then hot ones. The scan therefore walks back from the hot window's edge and stops at the
        first entry that is not hot: O(blocks that became demotable), not O(context), per
        sequence per step. The full scan of a 32K-token table (2,048 entries) took 73 µs in CPython
        on the dev CPU, about 1.2 ms a decode step at batch 16; on the H200 the warm-tier Gemma b16
        step went from 5.29 to 3.39 ms with this walk (BENCHMARKS.md, "KV tiers on the H200")."""
        b = min(len(table), max(0, num_tokens - self.hot_window) // self.block_size) - 1
        out: list[int] = []
        while b >= self.sink_blocks and table[b] >= 0:
            out.append(b)
            b -= 1
        out.reverse()
        return out

    def demote(self, tables: list[list[int]], num_tokens: int, force: bool = False) -> int:
        """Move a sequence's old blocks to the warm tier; return how many blocks moved.

        Every full block outside the sinks and the hot window is quantised into a newly allocated
        warm block (INT8, a scale per kv head, key min/max summaries), its table entry becomes
        -(w + 2) and its hot block is decref'd (never overwritten: it may be shared). When the warm
        pool has no free block the rest stay hot (oldest blocks move first). With a
        `demote_watermark` (and not `force`), only the oldest blocks whose release brings the
        group's hot pool down to the watermark move. No-op without a warm pool."""
        moved = 0
        for g, table in zip(self.groups, tables, strict=True):
            if g.warm is None:
                continue
            blocks = self.demotable(table, num_tokens)[: g.warm.allocator.num_free]
            if self.demote_watermark is not None and not force:
                excess = g.allocator.num_used - int(self.demote_watermark * g.num_blocks)
                picked, freed = [], 0
                for b in blocks:
                    if freed >= excess:
                        break
                    picked.append(b)
                    freed += g.allocator.ref_counts[table[b]] == 1  # a shared block stays in use
                blocks = picked
            if not blocks:
                continue
            wp = g.warm
            warm_ids = [wp.allocator.allocate() for _ in blocks]
            dev = g.k.device
            hot = torch.tensor([table[b] for b in blocks], dtype=torch.long, device=dev)
            dst = torch.tensor(warm_ids, dtype=torch.long, device=dev)
            nl = len(g.layers)
            for src, q_pool, s_pool in ((g.k, wp.kq, wp.ks), (g.v, wp.vq, wp.vs)):
                x = src.index_select(1, hot).flatten(0, 1)  # [layers * n, bs, kvh, d]
                q, sc = dispatch.quantize_blocks(x)
                q = q.view(nl, len(blocks), *q.shape[1:])
                q_pool.index_copy_(1, dst, q)
                s_pool.index_copy_(1, dst, sc.view(nl, len(blocks), -1))
                if src is g.k:
                    wp.kmin.index_copy_(1, dst, q.amin(dim=2))
                    wp.kmax.index_copy_(1, dst, q.amax(dim=2))
            for b, w in zip(blocks, warm_ids, strict=True):
                g.allocator.decref(table[b])
                table[b] = warm_entry(w)
            moved += len(blocks)
        return moved

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
        end_blocks = (start + count + bs - 1) // bs
        slots = []
        pos = torch.arange(start, start + count)
        for g, table in zip(self.groups, tables, strict=True):
            while len(table) < end_blocks:
                table.append(g.allocator.allocate())
            t = torch.tensor(table, dtype=torch.long)
            slots.append(t[pos // bs] * bs + pos % bs)
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

    def free(self, tables: list[list[int]]) -> None:
        for g, table in zip(self.groups, tables, strict=True):
            for b in table:
                self._decref_entry(g, b)
            table.clear()

    # --- swap (scheduler preemption) -------------------------------------------------------------
    def save_warm(self, gi: int, warm_ids: list[int]) -> dict[str, torch.Tensor]:
        """Host copies of warm blocks `warm_ids` of group gi (INT8 pages, scales, key summaries),
        which are then freed by the caller's `free`."""
        wp = self.groups[gi].warm
        names = ("kq", "vq", "ks", "vs", "kmin", "kmax")
        return dict(zip(names, self.copier.gather([getattr(wp, n) for n in names], 1, warm_ids), strict=True))

    def load_warm(self, gi: int, saved: dict[str, torch.Tensor]) -> list[int]:
        """Copy saved warm blocks back into newly allocated warm blocks; return their ids."""
        wp = self.groups[gi].warm
        n = saved["kq"].shape[1]
        ids = [wp.allocator.allocate() for _ in range(n)]
        self.copier.scatter([getattr(wp, name) for name in saved], 1, ids, list(saved.values()))
        return ids
