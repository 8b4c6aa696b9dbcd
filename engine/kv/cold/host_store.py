"""The host-memory half of the cold tier: an LRU block store in (optionally pinned) host memory.

Entries (`BlockEntry`) are keyed by a hex hash (`engine.kv.block_hash.chain_block_hashes`) and
hold the token ids they cover, named CPU tensors and a small JSON meta dict. `HostStore` keeps them
in (optionally pinned) host memory, evicting least recently used entries so that its byte count
never exceeds its capacity, and can hand each evicted entry to a callback (`ColdTier` spills it to
disk).

Copies are synchronous: `HostStore.put` copies the tensors it is given (device -> host included)
before returning. A caller that copies asynchronously on a side stream passes its finished pinned
CPU tensors with `copy=False` once its event has completed. Tensors handed out are shared with the
store: treat them as read-only. The store is thread-safe.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch

from engine.kv.cold.disk_store import BlockEntry, as_token_bytes, check_meta

logger = logging.getLogger(__name__)

EvictCallback = Callable[[str, BlockEntry], None]


def entry_nbytes(entry: BlockEntry, meta_json_len: int) -> int:
    """Bytes a host entry is charged: its tensors, its token ids and its meta as JSON."""
    return entry.tensor_bytes + len(entry.token_bytes) + meta_json_len


class HostStore:
    """LRU map key -> BlockEntry in host memory, never holding more than `capacity_bytes`.

    pin: allocate copies in page-locked memory (only when CUDA is available), for fast, asynchronous
    host -> device copies. on_evict(key, entry) is called for each entry evicted for room (not for
    `discard`, `clear` or an overwrite), outside the store's lock; its exceptions are logged.
    """

    def __init__(self, capacity_bytes: int, pin: bool = False, on_evict: EvictCallback | None = None) -> None:
        if capacity_bytes <= 0:
            raise ValueError("capacity_bytes must be positive")
        self.capacity_bytes = int(capacity_bytes)
        self.pin = bool(pin and torch.cuda.is_available())
        self.on_evict = on_evict
        self._lock = threading.RLock()
        self._entries: OrderedDict[str, tuple[BlockEntry, int]] = OrderedDict()  # LRU first
        self._bytes = 0
        self.hits = self.misses = self.evictions = self.rejected_too_large = 0

    @property
    def bytes_used(self) -> int:
        return self._bytes

    def __len__(self) -> int:
        return len(self._entries)

    def keys(self) -> list[str]:
        """Keys, least recently used first."""
        with self._lock:
            return list(self._entries)

    def contains(self, key: str) -> bool:
        return key in self._entries

    __contains__ = contains

    def put(
        self,
        key: str,
        tokens: Sequence[int] | bytes,
        tensors: Mapping[str, torch.Tensor],
        *,
        meta: Mapping[str, Any] | None = None,
        fingerprint: str = "",
        copy: bool = True,
    ) -> bool:
        """Store an entry (replacing one under the same key); False when it alone exceeds the capacity.

        copy=True copies every tensor into fresh contiguous host memory (pinned when `pin`); with
        copy=False the tensors, which must already be on the CPU, are kept as they are.
        """
        meta, meta_json = check_meta(meta)
        token_bytes = as_token_bytes(tokens)
        if copy:
            stored = {name: self._host_copy(t) for name, t in tensors.items()}
        else:
            if any(t.device.type != "cpu" for t in tensors.values()):
                raise ValueError("copy=False needs CPU tensors")
            stored = dict(tensors)
        entry = BlockEntry(token_bytes, stored, meta, fingerprint)
        size = entry_nbytes(entry, len(meta_json))
        if size > self.capacity_bytes:
            self.rejected_too_large += 1
            return False
        evicted: list[tuple[str, BlockEntry]] = []
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self._bytes -= old[1]
            while self._bytes + size > self.capacity_bytes:
                victim, (ventry, vsize) = self._entries.popitem(last=False)
                self._bytes -= vsize
                self.evictions += 1
                evicted.append((victim, ventry))
            self._entries[key] = (entry, size)
            self._bytes += size
        self._notify(evicted)
        return True

    def get(self, key: str) -> BlockEntry | None:
        """The entry (now most recently used) or None."""
        with self._lock:
            item = self._entries.get(key)
            if item is None:
                self.misses += 1
                return None
            self._entries.move_to_end(key)
            self.hits += 1
            return item[0]

    def peek(self, key: str) -> BlockEntry | None:
        """The entry without touching its recency or the hit counters."""
        item = self._entries.get(key)
        return item[0] if item else None

    def discard(self, key: str) -> bool:
        with self._lock:
            item = self._entries.pop(key, None)
            if item is None:
                return False
            self._bytes -= item[1]
            return True

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._bytes = 0

    def stats(self) -> dict[str, int]:
        return {
            "entries": len(self._entries), "bytes": self._bytes, "capacity_bytes": self.capacity_bytes,
            "hits": self.hits, "misses": self.misses, "evictions": self.evictions,
            "rejected_too_large": self.rejected_too_large,
        }

    def _host_copy(self, t: torch.Tensor) -> torch.Tensor:
        out = torch.empty(t.shape, dtype=t.dtype, pin_memory=self.pin)
        out.copy_(t.detach())
        return out

    def _notify(self, evicted: list[tuple[str, BlockEntry]]) -> None:
        if self.on_evict is None:
            return
        for key, entry in evicted:
            try:
                self.on_evict(key, entry)
            except Exception as exc:  # an eviction must not fail the put that caused it
                logger.warning("host KV store: on_evict(%s) failed: %s", key, exc)
