"""CUDA graphs for the decode step: one graph per (batch bucket, context bucket), replayed when a
step fits, so a decode step costs one graph launch instead of ~15 kernel launches per layer.

What is captured: `CausalLM.forward` over static input buffers — token ids, positions, slot
mappings (one per cache group), block tables padded to the bucket's width (int32, -1 padded) and
kv lengths. The batch is padded up to the next bucket of `BATCH_BUCKETS`; padding rows write their
K/V into a scratch block reserved per cache group (one block each, taken from the allocator once)
and attend only to it, so they never touch a sequence's blocks. The decode kernel's context splits
are sized from the bucket's context length (`longdoc_kernels.dispatch.static_max_kv_len`), never from a
device-to-host read, which is what makes the step capturable; the context bucket is the next power
of two of the longest sequence (at least `MIN_LEN_BUCKET`), so a graph is re-captured only when
the context doubles. Graphs share one memory pool and are captured on the first step that needs
them (a warm-up run on the padding rows, then the capture), or all at once by `capture_all`
(`LLM.warmup`), so that no request pays for a capture or the decode tuner.

Covered: decode-only steps on CUDA with the Triton backend, no attribution capture, no dynamic
RoPE, no sparse decode (its block selection is data-dependent), at most `BATCH_BUCKETS[-1]`
sequences. With an INT8 warm tier the captured step always hands the decode kernel the warm pages
(`ForwardContext.warm_always`: the eager path's check for warm entries reads the tables back to
the host); the kernel reads whatever mix of hot and warm entries the tables hold at replay, and a
table without warm entries costs it one scan of its entries. Everything else (prefill, mixed
steps, CPU, the torch reference backend) runs eagerly exactly as before: `run` returns None and the
runner goes on.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import torch

from engine.runner.forward_context import ForwardContext
from longdoc_kernels import dispatch

if TYPE_CHECKING:
    from engine.core.sequence import Sequence
    from engine.runner.model_runner import ModelRunner

log = logging.getLogger(__name__)

BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 48, 64, 96, 128)  # capture_all takes those <= max_num_seqs
MIN_LEN_BUCKET = 1024


def bucket_of(n: int, buckets: tuple[int, ...]) -> int | None:
    """Smallest bucket >= n, or None when n is larger than every bucket."""
    for b in buckets:
        if b >= n:
            return b
    return None


def len_bucket(n: int, max_len: int) -> int:
    """Context bucket of a step whose longest sequence has n tokens: the next power of two, at
    least MIN_LEN_BUCKET, at most max_len (the cache's max_model_len)."""
    b = MIN_LEN_BUCKET
    while b < n:
        b *= 2
    return max(n, min(b, max_len))


@dataclass
class DecodeGraph:
    """One captured decode step and its static buffers (padding rows preset)."""

    batch: int
    max_len: int
    ids: torch.Tensor  # long [B]
    pos: torch.Tensor  # long [B]
    slots: list[torch.Tensor]  # per group, long [B]
    tables: list[torch.Tensor]  # per group, int32 [B, W]
    lens: torch.Tensor  # int32 [B]
    graph: torch.cuda.CUDAGraph | None = None
    hidden: torch.Tensor | None = None  # output [B, hidden], valid after a replay
    host_tables: list[np.ndarray] = field(default_factory=list)  # staging, int32 [B, W]


class CudaGraphRunner:
    """Decode steps through captured graphs; see the module docstring for what is covered."""

    def __init__(self, runner: ModelRunner, batch_buckets: tuple[int, ...] = BATCH_BUCKETS) -> None:
        self.runner = runner
        self.cache = runner.cache
        self.batch_buckets = tuple(sorted(batch_buckets))
        self.graphs: dict[tuple[int, int], DecodeGraph] = {}
        self.pool = None
        self.scratch: list[int] | None = None  # one reserved block per cache group
        self.disabled: str | None = None  # why graphs were switched off (a failed capture)
        self.replays = 0
        self.captures = 0

    # --------------------------------------------------------------------------------- coverage
    def why_not(self, decodes: list[Sequence]) -> str | None:
        """None if this decode step can replay a graph, else the reason it runs eagerly."""
        if self.disabled:
            return self.disabled
        if not decodes:
            return "empty step"
        if bucket_of(len(decodes), self.batch_buckets) is None:
            return f"batch of {len(decodes)} > {self.batch_buckets[-1]}"
        if self.runner.dynamic_rope:
            return "dynamic RoPE"
        if getattr(self.cache, "sparse_top_k", None) is not None:
            return "sparse decode"
        return None

    # --------------------------------------------------------------------------------- replay
    def run(self, decodes: list[Sequence]) -> torch.Tensor | None:
        """Run one decode step of `decodes` through a graph and do the runner's bookkeeping (slots,
        num_cached, sliding-window release). Returns hidden states [len(decodes), hidden], or None
        (nothing done) when the step is not covered."""
        if self.why_not(decodes) is not None:
            return None
        b = len(decodes)
        bs = self.cache.block_size
        groups = len(self.cache.groups)
        windows = [grp.window for grp in self.cache.groups]
        longest = max(s.num_tokens for s in decodes)
        key = (bucket_of(b, self.batch_buckets), len_bucket(longest, self.cache.max_model_len))
        g = self.graphs.get(key)
        if g is None:
            try:
                g = self._capture(*key)
            except Exception as exc:  # a kernel that syncs or an op that cannot be captured
                self.disabled = f"capture failed: {type(exc).__name__}: {exc}"
                log.warning("CUDA graphs off: %s", self.disabled)
                return None
            self.graphs[key] = g
        ids_h = np.zeros(g.batch, np.int64)
        pos_h = np.zeros(g.batch, np.int64)
        lens_h = np.ones(g.batch, np.int32)
        slots_h = [np.full(g.batch, self.scratch[gi] * bs, np.int64) for gi in range(groups)]
        for i, seq in enumerate(decodes):
            p = seq.num_tokens - 1
            assert seq.num_cached == p, "a decoding sequence has exactly one uncached token"
            if any(len(t) <= p // bs for t in seq.tables):
                self.cache.allocate_slots(seq.tables, p, 1)  # a new block in some group
            ids_h[i] = seq.output_ids[-1] if seq.output_ids else seq.prompt_ids[-1]  # all_ids copies
            pos_h[i] = p
            lens_h[i] = p + 1
            for gi, table in enumerate(seq.tables):
                slots_h[gi][i] = table[p // bs] * bs + p % bs
                row = g.host_tables[gi][i]
                n = len(table)
                lo = 0 if windows[gi] is None else max(0, p - windows[gi] + 1) // bs  # the kernel starts there
                row[:lo] = -1
                row[lo:n] = table[lo:n]
                row[n:] = -1
        for i in range(b, g.batch):  # padding rows: the scratch block only
            for gi in range(groups):
                g.host_tables[gi][i, 0] = self.scratch[gi]
                g.host_tables[gi][i, 1:] = -1
        g.ids.copy_(torch.from_numpy(ids_h))
        g.pos.copy_(torch.from_numpy(pos_h))
        g.lens.copy_(torch.from_numpy(lens_h))
        for gi in range(groups):
            g.slots[gi].copy_(torch.from_numpy(slots_h[gi]))
            g.tables[gi].copy_(torch.from_numpy(g.host_tables[gi]))
        g.graph.replay()
        self.replays += 1
        for seq in decodes:
            seq.num_cached += 1
        after = getattr(self.runner, "after_forward", None)
        if after is not None:
            after(list(decodes))
        else:
            for seq in decodes:
                self.cache.release_out_of_window(seq.tables, seq.num_cached)
        return g.hidden[:b]

    # --------------------------------------------------------------------------------- capture
    def capture_all(self, max_batch: int, progress: Callable[[str], None] | None = None) -> int:
        """Capture (and so tune: the capture's warm-up run tunes the decode launch) the graph of every
        batch bucket a step of up to `max_batch` sequences uses and every context bucket up to the
        cache's max_model_len, so no request pays for them. Returns how many were captured now."""
        top = bucket_of(max_batch, self.batch_buckets) or self.batch_buckets[-1]
        top_len = self.cache.max_model_len
        longest = [top_len] + [MIN_LEN_BUCKET << k for k in range(32) if MIN_LEN_BUCKET << k < top_len]
        lens = sorted({len_bucket(n, top_len) for n in longest})
        keys = [(b, n) for b in self.batch_buckets if b <= top for n in lens if (b, n) not in self.graphs]
        for i, key in enumerate(keys):
            if self.disabled:
                break
            if progress is not None:
                progress(f"warm-up: decode graph {i + 1}/{len(keys)} (batch {key[0]}, context {key[1]})")
            try:
                self.graphs[key] = self._capture(*key)
            except Exception as exc:  # as in run(): graphs off, the eager path stays
                self.disabled = f"capture failed: {type(exc).__name__}: {exc}"
                log.warning("CUDA graphs off: %s", self.disabled)
        return len(keys)

    def _reserve_scratch(self) -> list[int]:
        if self.scratch is None:
            self.scratch = [grp.allocator.allocate() for grp in self.cache.groups]
        return self.scratch

    def _capture(self, batch: int, max_len: int) -> DecodeGraph:
        dev = self.runner.device
        bs = self.cache.block_size
        scratch = self._reserve_scratch()
        width = -(-max_len // bs)
        tables = []
        host = []
        for gi in range(len(self.cache.groups)):
            t = np.full((batch, width), -1, np.int32)
            t[:, 0] = scratch[gi]
            host.append(t)
            tables.append(torch.from_numpy(t).to(dev))
        g = DecodeGraph(
            batch=batch,
            max_len=max_len,
            ids=torch.zeros(batch, dtype=torch.long, device=dev),
            pos=torch.zeros(batch, dtype=torch.long, device=dev),
            slots=[torch.full((batch,), s * bs, dtype=torch.long, device=dev) for s in scratch],
            tables=tables,
            lens=torch.ones(batch, dtype=torch.int32, device=dev),
            host_tables=host,
        )
        ctx = ForwardContext(
            cache=self.cache,
            backend=self.runner.backend,
            slot_mappings=g.slots,
            prefills=[],
            decode_start=0,
            decode_block_tables=g.tables,
            decode_kv_lens=g.lens,
            warm_always=True,
        )
        model = self.runner.model
        if self.pool is None:
            self.pool = torch.cuda.graph_pool_handle()
        with torch.inference_mode(), dispatch.static_max_kv_len(max_len):
            # warm-up on a side stream (Triton compiles, cuBLAS picks its kernels); the padding rows
            # write only the scratch blocks
            side = torch.cuda.Stream(dev)
            side.wait_stream(torch.cuda.current_stream(dev))
            with torch.cuda.stream(side):
                for _ in range(2):
                    model(g.ids, g.pos, ctx)
            torch.cuda.current_stream(dev).wait_stream(side)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, pool=self.pool):
                g.hidden = model(g.ids, g.pos, ctx)
        g.graph = graph
        self.captures += 1
        return g


def graphs_supported(runner: ModelRunner) -> str | None:
    """None if decode graphs can run for this runner at all, else why not."""
    if runner.device.type != "cuda" or not torch.cuda.is_available():
        return "not on CUDA"
    if getattr(runner.backend, "name", "") != "triton":
        return f"backend {getattr(runner.backend, 'name', '?')!r} syncs in decode (needs the Triton backend)"
    if not dispatch.use_triton(runner.device):
        return "Triton is not available"
    return None


def attach_graphs(runner: ModelRunner, enabled: bool | None) -> CudaGraphRunner | None:
    """Give `runner` a CudaGraphRunner (as `runner.graphs`) when `enabled` (None: whenever
    supported). Asking for graphs where they cannot run logs why and keeps the eager path."""
    runner.graphs = None
    if enabled is False:
        return None
    reason = graphs_supported(runner)
    if reason is not None:
        if enabled:
            log.warning("cuda_graphs=True ignored: %s", reason)
        return None
    runner.graphs = CudaGraphRunner(runner)
    return runner.graphs
