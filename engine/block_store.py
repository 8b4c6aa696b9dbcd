"""The cold tier of the KV cache: a host-memory LRU block store, and the two-level `ColdTier` over it
and the on-disk store (`engine.disk_store.DiskStore`, re-exported here).

Entries (`BlockEntry`) are keyed by a hex hash (`engine.prefix_hash.chain_block_hashes`) and hold
the token ids they cover, named CPU tensors and a small JSON meta dict. `HostStore` keeps them in
(optionally pinned) host memory, evicting least recently used entries so that its byte count never
exceeds its capacity, and can hand each evicted entry to a callback (the engine spills it to disk).
`ColdTier.get` tries host memory, then disk, promoting a disk hit into host memory; `ColdTier.put`
writes host memory and, when asked (or write-through), disk.

Copies are synchronous: `HostStore.put` copies the tensors it is given (device -> host included)
before returning. A caller that copies asynchronously on a side stream passes its finished pinned
CPU tensors with `copy=False` once its event has completed. Tensors handed out are shared with the
store: treat them as read-only. Both stores are thread-safe.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch

from engine.disk_store import BlockEntry, DiskStore, as_token_bytes, check_meta

__all__ = ["BlockEntry", "HostStore", "DiskStore", "ColdTier"]

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


class ColdTier:
    """Host memory in front of disk.

    write_through: every put also goes to disk (otherwise only puts with persist=True do).
    spill_evicted: entries evicted from host memory are written to disk unless already there.
    With no host store every put goes to disk; with no disk store, persist is ignored.
    """

    def __init__(
        self,
        host: HostStore | None,
        disk: DiskStore | None,
        *,
        write_through: bool = False,
        spill_evicted: bool = False,
    ) -> None:
        self.host = host
        self.disk = disk
        self.write_through = write_through
        self.host_hits = self.disk_hits = self.misses = self.host_mismatches = 0
        self.puts = self.disk_writes = self.spills = 0
        if spill_evicted and host is not None and disk is not None:
            chained = host.on_evict

            def spill(key: str, entry: BlockEntry) -> None:
                self._spill(key, entry)
                if chained is not None:
                    chained(key, entry)

            host.on_evict = spill

    def get(self, key: str, *, tokens: Sequence[int] | bytes, fingerprint: str) -> BlockEntry | None:
        """The entry for `key` made by `fingerprint` over exactly `tokens`, from host or disk, or None."""
        expected = as_token_bytes(tokens)
        if self.host is not None:
            entry = self.host.get(key)
            if entry is not None:
                if entry.matches(expected, fingerprint):
                    self.host_hits += 1
                    return entry
                self.host_mismatches += 1
                logger.warning("cold KV tier: host entry %s is for other tokens or another model; dropped", key)
                self.host.discard(key)
        if self.disk is not None:
            entry = self.disk.get(key, tokens=expected, fingerprint=fingerprint,
                                  pin=self.host is not None and self.host.pin)
            if entry is not None:
                self.disk_hits += 1
                if self.host is not None and self.host.put(
                    key, entry.token_bytes, entry.tensors, meta=entry.meta, fingerprint=fingerprint, copy=False
                ):
                    return self.host.peek(key) or entry
                return entry
        self.misses += 1
        return None

    def put(
        self,
        key: str,
        tokens: Sequence[int] | bytes,
        tensors: Mapping[str, torch.Tensor],
        *,
        fingerprint: str,
        meta: Mapping[str, Any] | None = None,
        persist: bool | None = None,
    ) -> bool:
        """Store in host memory and, when `persist` (default: `write_through`), on disk. True when
        at least one level took it."""
        if not fingerprint:
            raise ValueError("fingerprint is required")
        self.puts += 1
        to_disk = self.disk is not None and (self.write_through if persist is None else persist)
        stored = False
        source: Mapping[str, torch.Tensor] = tensors
        if self.host is not None:
            stored = self.host.put(key, tokens, tensors, meta=meta, fingerprint=fingerprint)
            held = self.host.peek(key) if stored else None
            if held is not None:
                source = held.tensors  # already on the host: no second device -> host copy
        if self.disk is not None and (to_disk or self.host is None):
            if self.disk.put(key, tokens, source, fingerprint=fingerprint, meta=meta):
                self.disk_writes += 1
                stored = True
        return stored

    def contains(self, key: str) -> str | None:
        """"host", "disk" or None: where `key` is (unverified)."""
        if self.host is not None and self.host.contains(key):
            return "host"
        if self.disk is not None and self.disk.contains(key):
            return "disk"
        return None

    def discard(self, key: str) -> None:
        if self.host is not None:
            self.host.discard(key)
        if self.disk is not None:
            self.disk.discard(key)

    def stats(self) -> dict[str, Any]:
        return {
            "host_hits": self.host_hits, "disk_hits": self.disk_hits, "misses": self.misses,
            "host_mismatches": self.host_mismatches, "puts": self.puts, "disk_writes": self.disk_writes,
            "spills": self.spills,
            "host": self.host.stats() if self.host is not None else None,
            "disk": self.disk.stats() if self.disk is not None else None,
        }

    def _spill(self, key: str, entry: BlockEntry) -> None:
        if self.disk is None or not entry.fingerprint or self.disk.contains(key):
            return
        if self.disk.put(key, entry.token_bytes, entry.tensors, fingerprint=entry.fingerprint, meta=entry.meta):
            self.spills += 1
