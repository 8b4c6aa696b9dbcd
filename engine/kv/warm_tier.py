"""The warm tier: older full blocks of the global-attention layers kept on the device in INT8, with a
float32 scale per (block, kv head) and per-block key min/max summaries for sparse decode.

`WarmTier` holds the operations (pool sizing, `demote`, swap copies of warm blocks); `PagedKVCache`
(engine.kv.paged_cache) is built on it and supplies `groups`, `block_size` and `copier`. `demote`
runs after every forward, or with `CacheConfig.demote_watermark` only while the hot pool is fuller
than the watermark, and under block pressure before the scheduler preempts; attention reads warm
blocks in place through the block table (entry <= -2 is warm block -entry - 2; see
longdoc_kernels/__init__.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from engine.kv.block_pool import BlockAllocator
from longdoc_kernels import dispatch

if TYPE_CHECKING:
    from engine.config import CacheConfig
    from engine.kv.block_pool import CacheGroup
    from engine.kv.tier_copy import TierCopier
    from engine.model.config import ModelConfig


def device_ids(a: list[int], b: list[int], dev: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """Two id lists as int64 tensors on `dev`. On CUDA one copy from pinned memory, queued without
    waiting: a copy from pageable memory waits for the stream, and demotion copies run after every
    step (once per layer group, `demote_all`)."""
    ids = torch.tensor(a + b, dtype=torch.long)
    if dev.type == "cuda":
        ids = ids.pin_memory().to(dev, non_blocking=True)
    elif dev.type != "cpu":
        ids = ids.to(dev)
    return ids[: len(a)], ids[len(a):]


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



class WarmTier:
    """The warm-tier half of `PagedKVCache`: INT8 pools per layer group, demotion, swap copies."""

    groups: list[CacheGroup]
    block_size: int
    max_num_seqs: int
    copier: TierCopier

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
            want = {id(g): self.max_num_seqs * (-(-g.window // bs) + 1) for g in sliding}
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

    def demote_all(self, seqs: list[tuple[list[list[int]], int]]) -> int:
        """`demote` for several sequences ((tables, num_tokens) each) after one step: the same blocks
        chosen in the same order, the data moved by one `demote_copy` per group instead of one per
        sequence and group (a step of 16 sequences: 16x fewer launches and id copies). Returns how
        many blocks moved."""
        if not self.has_warm():
            return 0
        pending: dict[int, tuple[list[int], list[int]]] = {}
        moved = sum(self.demote(tables, n, pending=pending) for tables, n in seqs)
        # no hot block is allocated between the table updates above and these copies, so the hot
        # blocks just decref'd still hold their data
        for gi, (hot_ids, warm_ids) in pending.items():
            self.demote_copy(gi, hot_ids, warm_ids)
        return moved

    def demote(self, tables: list[list[int]], num_tokens: int, force: bool = False,
               pending: dict[int, tuple[list[int], list[int]]] | None = None) -> int:
        """Move a sequence's old blocks to the warm tier; return how many blocks moved.

        Every full block outside the sinks and the hot window is quantised into a newly allocated
        warm block (INT8, a scale per kv head, key min/max summaries), its table entry becomes
        -(w + 2) and its hot block is decref'd (never overwritten: it may be shared). When the warm
        pool has no free block the rest stay hot (oldest blocks move first). With a
        `demote_watermark` (and not `force`), only the oldest blocks whose release brings the
        group's hot pool down to the watermark move. No-op without a warm pool. With `pending`
        (`demote_all`), the copies are appended to it per group, for the caller to run."""
        moved = 0
        for gi, (g, table) in enumerate(zip(self.groups, tables, strict=True)):
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
            warm_ids = [g.warm.allocator.allocate() for _ in blocks]
            hot_ids = [table[b] for b in blocks]
            if pending is None:
                self.demote_copy(gi, hot_ids, warm_ids)
            else:
                queued_hot, queued_warm = pending.setdefault(gi, ([], []))
                queued_hot += hot_ids
                queued_warm += warm_ids
            for b, w in zip(blocks, warm_ids, strict=True):
                g.allocator.decref(table[b])
                table[b] = warm_entry(w)
            moved += len(blocks)
        return moved

    def demote_copy(self, gi: int, hot_ids: list[int], warm_ids: list[int]) -> None:
        """The data half of `demote`: quantise hot blocks `hot_ids` of group gi into warm blocks
        `warm_ids` (a KV data operation: recorded for the other tensor-parallel ranks)."""
        self._record(("demote", gi, hot_ids, warm_ids))
        g = self.groups[gi]
        wp = g.warm
        dev = g.k.device
        hot, dst = device_ids(hot_ids, warm_ids, dev)
        nl, n = len(g.layers), len(hot_ids)
        for src, q_pool, s_pool in ((g.k, wp.kq, wp.ks), (g.v, wp.vq, wp.vs)):
            x = src.index_select(1, hot).flatten(0, 1)  # [layers * n, bs, kvh, d]
            q, sc = dispatch.quantize_blocks(x)
            q = q.view(nl, n, *q.shape[1:])
            q_pool.index_copy_(1, dst, q)
            s_pool.index_copy_(1, dst, sc.view(nl, n, -1))
            if src is g.k:
                wp.kmin.index_copy_(1, dst, q.amin(dim=2))
                wp.kmax.index_copy_(1, dst, q.amax(dim=2))

    # --- swap (scheduler preemption) -------------------------------------------------------------
    # Each save returns {"handle": h, "data": host tensors}; the tensor-parallel ranks keep their own
    # shard's copy under the same handle (engine/parallel), which load and `drop_saved` name.
    WARM_NAMES = ("kq", "vq", "ks", "vs", "kmin", "kmax")

    def _pools(self, gi: int, kind: str) -> list[torch.Tensor]:
        g = self.groups[gi]
        return [g.k, g.v] if kind == "hot" else [getattr(g.warm, n) for n in self.WARM_NAMES]

    def save_blocks(self, gi: int, kind: str, ids: list[int]) -> dict:
        """Host copies of blocks `ids` of group gi's "hot" pool (K, V) or "warm" pool (INT8 pages,
        scales, key summaries), which the caller then frees."""
        handle = self._new_handle()
        self._record(("save", gi, kind, ids, handle))
        return {"handle": handle, "data": self.copier.gather(self._pools(gi, kind), 1, ids)}

    def load_blocks(self, gi: int, kind: str, saved: dict) -> list[int]:
        """Copy saved blocks back into newly allocated blocks of the same pool; return their ids."""
        g = self.groups[gi]
        alloc = g.allocator if kind == "hot" else g.warm.allocator
        ids = [alloc.allocate() for _ in range(saved["data"][0].shape[1])]
        self._record(("load", gi, kind, ids, saved["handle"]))
        self.copier.scatter(self._pools(gi, kind), 1, ids, saved["data"])
        return ids

    def drop_saved(self, handles: list[int]) -> None:
        """Saved copies that will not be loaded back (an aborted swapped-out request)."""
        if handles:
            self._record(("drop", handles))

    # --- KV data operations, for tensor parallelism ----------------------------------------------
    def _new_handle(self) -> int:
        self._handles = getattr(self, "_handles", 0) + 1
        return self._handles

    def _record(self, op: tuple) -> None:
        """Rank 0 of a tensor-parallel engine records every operation on the pools' data outside
        the forward (`ops` is a list there, None elsewhere); the other ranks replay them in order
        on their shards before the next step (`apply_ops`)."""
        ops = getattr(self, "ops", None)
        if ops is not None:
            ops.append(op)

    def take_ops(self) -> list[tuple]:
        """The operations recorded since the last call (and a fresh list for the next ones)."""
        ops, self.ops = self.ops, []
        return ops

    def apply_ops(self, ops: list[tuple], host: dict[int, list[torch.Tensor]]) -> None:
        """Replay rank 0's recorded operations on this rank's shard; `host` holds this rank's saved
        copies by handle."""
        for op in ops:
            name = op[0]
            if name == "demote":
                self.demote_copy(*op[1:])
            elif name == "save":
                _, gi, kind, ids, handle = op
                host[handle] = self.copier.gather(self._pools(gi, kind), 1, ids)
            elif name == "load":
                _, gi, kind, ids, handle = op
                self.copier.scatter(self._pools(gi, kind), 1, ids, host.pop(handle))
            elif name == "drop":
                for h in op[1]:
                    host.pop(h, None)
            else:
                raise ValueError(f"unknown KV operation {name!r}")
