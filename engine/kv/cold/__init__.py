"""The cold tier: KV blocks in host memory and on disk, keyed by content, checked on read.

- `disk_store`: `DiskStore`, one checksummed file per entry, LRU-capped, safe across processes;
  `BlockEntry`, the entry both stores hold.
- `host_store`: `HostStore`, an LRU store in (optionally pinned) host memory.
- `tier`: `ColdTier`, host memory in front of disk.
"""

from engine.kv.cold.disk_store import BlockEntry, DiskStore
from engine.kv.cold.host_store import HostStore
from engine.kv.cold.tier import ColdTier

__all__ = ["BlockEntry", "ColdTier", "DiskStore", "HostStore"]
