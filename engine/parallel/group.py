"""The ranks of one tensor-parallel engine and what they say to each other.

Rank 0 is the process that built the `LLM`; ranks 1..W-1 are worker processes it starts
(`launch`). Compute collectives (the all-reduces after attention and the MLP, the vocabulary
gather) run on the default process group: NCCL on CUDA, gloo on the CPU. Control messages (rank
0's step, its KV operations, "join this logits call", stop) are pickled objects broadcast from
rank 0 over a gloo group, which on CUDA is a second group beside NCCL's.
"""

from __future__ import annotations

import logging
import socket
import time
import zlib
from datetime import timedelta

import torch
import torch.distributed as dist

from engine.errors import TensorParallelError

log = logging.getLogger(__name__)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class TPGroup:
    """This process's view of the group: its rank, the world size, collectives, control messages.

    vocab_bounds: every rank's [lo, hi) rows of the vocabulary (for `gather_vocab`)."""

    def __init__(self, rank: int, world: int, device: torch.device, port: int, vocab_bounds: list[tuple[int, int]],
                 timeout_s: float = 600.0) -> None:
        self.rank, self.world, self.device = rank, world, device
        self.vocab_bounds = vocab_bounds
        backend = "nccl" if device.type == "cuda" else "gloo"
        if dist.is_initialized():
            raise TensorParallelError("a tensor-parallel engine already runs in this process; close() it first")
        dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world,
                                timeout=timedelta(seconds=timeout_s))
        self.control = dist.new_group(backend="gloo") if backend == "nccl" else dist.group.WORLD
        self.steps = 0
        self.chain = 0  # running checksum of every step's tables and lengths (the consistency check)
        self.comm_s = 0.0  # seconds this rank spent in compute collectives (waiting for the others included)
        self.comm_calls = 0

    # --- compute collectives ---------------------------------------------------------------------
    def all_reduce(self, x: torch.Tensor) -> torch.Tensor:
        """Sum x over the ranks, in place (x's dtype; float32 on the CPU's gloo)."""
        t = time.perf_counter()
        dist.all_reduce(x)
        self.comm_s += time.perf_counter() - t
        self.comm_calls += 1
        return x

    def gather_vocab(self, local: torch.Tensor) -> torch.Tensor:
        """Join every rank's logits over its vocabulary slice [N, hi - lo] into [N, V]."""
        width = max(hi - lo for lo, hi in self.vocab_bounds)
        if local.shape[-1] < width:  # all_gather takes equal shapes: pad the short last slice
            local = torch.nn.functional.pad(local, (0, width - local.shape[-1]))
        parts = [torch.empty_like(local) for _ in range(self.world)]
        t = time.perf_counter()
        dist.all_gather(parts, local.contiguous())
        self.comm_s += time.perf_counter() - t
        self.comm_calls += 1
        return torch.cat([p[..., : hi - lo] for p, (lo, hi) in zip(parts, self.vocab_bounds, strict=True)], dim=-1)

    # --- control -----------------------------------------------------------------------------------
    def send(self, msg: tuple) -> None:
        """Rank 0: broadcast a control message to the other ranks."""
        dist.broadcast_object_list([msg], src=0, group=self.control)

    def recv(self) -> tuple:
        """Ranks > 0: the next control message from rank 0."""
        box = [None]
        dist.broadcast_object_list(box, src=0, group=self.control)
        return box[0]

    def call_in(self, kind: str, *args) -> None:
        """Rank 0: have the other ranks join the collective call `kind` that rank 0 is about to
        make (they run the same method on the same arguments); a no-op on the other ranks."""
        if self.rank == 0:
            self.send((kind, *args))

    def verify(self, digest: int) -> None:
        """The consistency check after a step: fold this rank's checksum of the step's block tables
        and sequence lengths into its running chain, gather every rank's chain and raise
        TensorParallelError on every rank if they differ (the step's tokens are not returned)."""
        self.steps += 1
        self.chain = zlib.crc32(digest.to_bytes(8, "little"), self.chain)
        mine = torch.tensor([self.chain], dtype=torch.long)
        every = [torch.empty_like(mine) for _ in range(self.world)]
        dist.all_gather(every, mine, group=self.control)
        chains = [int(t) for t in every]
        if len(set(chains)) > 1:
            bad = [r for r, c in enumerate(chains) if c != chains[0]]
            raise TensorParallelError(
                f"tensor-parallel ranks diverged at step {self.steps}: the block tables or sequence lengths of "
                f"rank(s) {bad} differ from rank 0's; the step's output is discarded")

    def close(self) -> None:
        if dist.is_initialized():
            dist.destroy_process_group()


def step_digest(seq_ids: list[int], lengths: list[int], tables: list[list[list[int]]]) -> int:
    """A checksum of a step's sequences: their ids, their cached lengths after the step and their
    block tables per group (trailing -1 padding ignored)."""
    h = zlib.crc32(torch.tensor(seq_ids + lengths, dtype=torch.long).numpy().tobytes())
    for per_group in tables:
        for t in per_group:
            while t and t[-1] == -1:
                t = t[:-1]
            h = zlib.crc32(torch.tensor(t + [-7], dtype=torch.long).numpy().tobytes(), h)
    return h

