"""The block pool: fixed-size KV blocks handed out by a free-list allocator with reference counts,
and the pool of one group of layers that share an attention span (`CacheGroup`).

Reference counts let a block be shared by several sequences (prefix sharing, engine.kv.prefix_cache):
a block returns to the free list when its count reaches zero, keeping its contents until reused.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from engine.errors import CacheFullError

if TYPE_CHECKING:
    from engine.kv.warm_tier import WarmPool


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

    def allocate_many(self, n: int) -> list[int]:
        """`allocate` n times (a long prompt's chunk needs thousands of blocks at once)."""
        if n > len(self.free):
            raise CacheFullError(f"KV cache full: all {self.num_blocks} blocks are in use")
        pop, refs, reuse = self.free.popitem, self.ref_counts, self.on_reuse
        blocks = [pop(last=False)[0] for _ in range(n)]
        for b in blocks:
            refs[b] = 1
        if reuse is not None:
            for b in blocks:
                reuse(b)
        return blocks

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

