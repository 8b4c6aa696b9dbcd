"""The cold tier of the KV cache: `ColdTier`, host memory (`HostStore`) in front of disk
(`DiskStore`).

`ColdTier.get` tries host memory, then disk, promoting a disk hit into host memory; `ColdTier.put`
writes host memory and, when asked (or write-through), disk. Entries are keyed by a hex hash
(`engine.kv.block_hash.chain_block_hashes`) and checked against their tokens and the model
fingerprint on every read.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

import torch

from engine.kv.cold.disk_store import BlockEntry, DiskStore, as_token_bytes
from engine.kv.cold.host_store import HostStore

logger = logging.getLogger(__name__)


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
