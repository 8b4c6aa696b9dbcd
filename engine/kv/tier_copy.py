"""Copies of KV blocks between the device pools and host memory (the cold tier's host side, the
scheduler's swap), asynchronous on a side stream on CUDA.

On CUDA every copy runs on one copy stream. A gather (device -> host) first waits for the compute
stream's work so far (the blocks' last writes), reads the blocks on the copy stream, and the compute
stream then waits only for those reads (an event), not for the transfer: the caller may free and
reuse the blocks at once, and neither the host nor later kernels wait for the bytes to reach host
memory. The host tensors are pinned; their copy finishes in stream order before any later copy on
the same stream (a swap-in of the same payload, say), and `synchronize` waits for all of them
before anyone reads them on the host. A write (host -> device) runs on the copy stream after the
compute stream's work so far (the target blocks' previous users), and the compute stream waits for
it before its next kernel. Temporaries are allocated on the copy stream, so the caching allocator
never hands their memory to the compute stream while a copy still uses it.

Elsewhere (the CPU) the same calls are plain synchronous copies.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class CopyStats:
    gathers: int = 0
    writes: int = 0
    bytes_to_host: int = 0
    bytes_to_device: int = 0


class TierCopier:
    def __init__(self, device: torch.device | str) -> None:
        self.device = torch.device(device)
        cuda = self.device.type == "cuda" and torch.cuda.is_available()
        self.stream = torch.cuda.Stream(self.device) if cuda else None
        self.stats = CopyStats()

    @property
    def asynchronous(self) -> bool:
        return self.stream is not None

    def gather(self, pools: list[torch.Tensor], dim: int, ids: list[int]) -> list[torch.Tensor]:
        """Host copies of entries `ids` (along `dim`) of each pool."""
        self.stats.gathers += 1
        if self.stream is None:
            idx = torch.tensor(ids, dtype=torch.long, device=pools[0].device)
            out = [p.index_select(dim, idx).to("cpu") for p in pools]
        else:
            main = torch.cuda.current_stream(self.device)
            self.stream.wait_stream(main)
            out = []
            with torch.cuda.stream(self.stream):
                idx = torch.tensor(ids, dtype=torch.long).to(self.device, non_blocking=True)
                picked = [p.index_select(dim, idx) for p in pools]
                read = torch.cuda.Event()
                read.record(self.stream)
                for t in picked:
                    h = torch.empty(t.shape, dtype=t.dtype, pin_memory=True)
                    h.copy_(t, non_blocking=True)
                    out.append(h)
            main.wait_event(read)  # later kernels may overwrite the blocks once they have been read
        self.stats.bytes_to_host += sum(t.numel() * t.element_size() for t in out)
        return out

    def scatter(self, pools: list[torch.Tensor], dim: int, ids: list[int], hosts: list[torch.Tensor]) -> None:
        """pool.index_copy_(dim, ids, host) for each pool and host tensor (one index for all)."""

        def fn() -> None:
            idx = torch.tensor(ids, dtype=torch.long).to(pools[0].device, non_blocking=True)
            for p, h in zip(pools, hosts, strict=True):
                p.index_copy_(dim, idx, h.to(p.device, non_blocking=True))

        self._run(fn, sum(h.numel() * h.element_size() for h in hosts))

    def write(self, pairs: list[tuple[torch.Tensor, torch.Tensor]]) -> None:
        """dst.copy_(src) for each (device view, host tensor) pair."""
        self._run(lambda: [d.copy_(s, non_blocking=True) for d, s in pairs],
                  sum(s.numel() * s.element_size() for _, s in pairs))

    def _run(self, fn, nbytes: int) -> None:
        self.stats.writes += 1
        self.stats.bytes_to_device += nbytes
        if self.stream is None:
            fn()
            return
        main = torch.cuda.current_stream(self.device)
        self.stream.wait_stream(main)
        with torch.cuda.stream(self.stream):
            fn()
        main.wait_stream(self.stream)  # the next kernel on the compute stream sees the blocks

    def synchronize(self) -> None:
        """Wait until every copy issued so far is done (host tensors readable on the host)."""
        if self.stream is not None:
            self.stream.synchronize()
