"""What one forward pass needs to know about its batch: which rows of the flat token batch belong to
which sequence, where their K/V go in the paged cache (slot mappings), which blocks they read
(block tables), and the attention backend. Built by the model runner, read by every attention layer.

A chunk with nothing cached before it (q_offset 0, no attribution capture) is first offered to
the backend's `prefill_fresh` (the Triton backend runs torch's fused SDPA kernels there for causal
layers); `prefill` runs when it declines. In a step of several chunks, those after a cached prefix
go together into one `prefill_many` call, except the ones the backend `prefers_alone` (long chunks
the Triton backend runs through flash attention over their gathered prefix).

Warm tier: `attend` hands the backend the layer's INT8 warm pages (`PagedKVCache.layer_warm`) only
when some block table of the call has a warm entry (checked once per group and forward), so calls
without warm blocks take the backends' plain path. With `CacheConfig.sparse_top_k` set, decode rows
of global layers attend over a compacted block table (engine.attention.sparse: top-k warm blocks by their
key bounds plus every hot block); prefill and attribution captures stay dense.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from engine.attention import sparse
from engine.attention.backend import AttentionBackend, AttentionOutput
from engine.kv.paged_cache import PagedKVCache
from engine.kv.warm_tier import WarmPages
from longdoc_kernels.cpu import available as cpu_kernels  # the C kernels, or None


@dataclass
class PrefillItem:
    """A chunk of one sequence's prompt: rows start..start+length-1 of the batch, at global positions
    q_offset..q_offset+length-1; kv_len = q_offset + length tokens are cached after the write."""

    start: int
    length: int
    q_offset: int
    block_tables: list[torch.Tensor]  # one per cache group
    warm: list[bool] = field(default_factory=list)  # per group: the table has a warm entry (known on the host)


@dataclass
class StepInputs:
    """One forward's batch as host data (`ModelRunner.prepare`): what `ModelRunner.execute` copies
    to the device, and what a tensor-parallel driver broadcasts to the other ranks. prefills: per
    chunk (first batch row, length, q_offset, per group whether its table has a warm entry, per
    group its table's width in `prefill_tables`)."""

    ids: torch.Tensor  # [T] token ids, prefill chunks first, then one row per decoding sequence
    positions: torch.Tensor  # [T]
    rope_seq_lens: torch.Tensor | None  # [T], dynamic NTK RoPE only
    slot_mappings: list[torch.Tensor]  # per group: [T] slot ids
    prefills: list[tuple[int, int, int, list[bool], list[int]]]
    prefill_tables: list[torch.Tensor] | None  # per group: [len(prefills), max_blocks], -1 padded
    decode_start: int
    decode_tables: list[torch.Tensor] | None  # per group: [B, max_blocks], -1 padded
    decode_lens: torch.Tensor | None  # [B]
    bucket: int | None  # the decode rows' context bucket (engine/runner/cuda_graph.len_bucket)
    seq_ids: list[int] = field(default_factory=list)  # the sequences of the rows (prefills, then decodes)


@dataclass
class Capture:
    """Attribution: keep q and the log-sum-exp of rows `rows` (batch rows: a slice, or a tensor of
    row indices on the device when several sequences' rows are kept) at layers `layers`."""

    layers: set[int]
    rows: slice | torch.Tensor
    q: dict[int, torch.Tensor] = field(default_factory=dict)
    lse: dict[int, torch.Tensor] = field(default_factory=dict)
    # tensor parallelism: (forward id, first row, rows) of the forward's capture this one is a slice
    # of; the other ranks keep their own heads' captures by forward id (engine/parallel/runner.py)
    origin: tuple[int, int, int] | None = None
    forward_id: int | None = None  # set by a tensor-parallel runner on the capture of a forward


def _as_stored(x: torch.Tensor, pages: torch.Tensor) -> torch.Tensor:
    """x as the pages hold it: rounded through their dtype where it differs (16-bit pages on the CPU,
    CacheConfig.kv_dtype), so that attention over a chunk's fresh keys computes what a read from the
    cache would; x itself otherwise. Only for a fresh chunk's attention, not on every step's write."""
    return x if x.dtype == pages.dtype else x.to(pages.dtype).to(x.dtype)


@dataclass
class ForwardContext:
    cache: PagedKVCache
    backend: AttentionBackend
    slot_mappings: list[torch.Tensor]  # per group: slot id of every batch row
    prefills: list[PrefillItem]
    prefill_tables: list[torch.Tensor] | None = None  # per group: [len(prefills), max_blocks], -1 padded
    decode_start: int = 0  # rows decode_start.. are decode rows, one per sequence
    decode_block_tables: list[torch.Tensor] | None = None  # per group: [B, max_blocks], -1 padded
    decode_kv_lens: torch.Tensor | None = None  # [B]
    rope_seq_lens: torch.Tensor | None = None  # [T], dynamic NTK RoPE only
    capture: Capture | None = None
    warm_always: bool = False  # decode: hand the backend the warm pages without looking at the tables
    _warm_prefill: dict[tuple[int, int], bool] = field(default_factory=dict, init=False, repr=False)
    _warm_decode: dict[int, bool] = field(default_factory=dict, init=False, repr=False)
    _many: dict[tuple, object] = field(default_factory=dict, init=False, repr=False)

    def _prefill_warm(self, i: int, gi: int, warm: WarmPages | None) -> WarmPages | None:
        """`warm` if prefill item i's table of group gi has a warm entry, else None."""
        if warm is None:
            return None
        p = self.prefills[i]
        if p.warm:
            return warm if p.warm[gi] else None
        key = (i, gi)
        if key not in self._warm_prefill:
            self._warm_prefill[key] = bool((p.block_tables[gi] <= -2).any())
        return warm if self._warm_prefill[key] else None

    def _prefill_many(
        self, gi: int, which: list[int], q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
        out: torch.Tensor, lse: torch.Tensor | None, scale: float, window: int | None, softcap: float | None,
    ) -> None:
        """Prefill items `which` (no warm entries) in one backend call: their block tables as rows
        of one padded table, and their index tensors built once per forward (kept in `_many`)."""
        key = tuple(which)
        if (gi, key) not in self._many:
            if self.prefill_tables is not None:
                full = self.prefill_tables[gi]
                tab = full if len(which) == len(self.prefills) else full[torch.tensor(which, device=full.device)]
            else:
                rows = [self.prefills[i].block_tables[gi] for i in which]
                tab = torch.full((len(rows), max(r.numel() for r in rows)), -1, dtype=torch.long, device=q.device)
                for j, r in enumerate(rows):
                    tab[j, : r.numel()] = r
            self._many[(gi, key)] = tab
        if key not in self._many:
            self._many[key] = ([(self.prefills[i].start, self.prefills[i].length, self.prefills[i].q_offset)
                                for i in which], {})
        items, meta = self._many[key]
        self.backend.prefill_many(q, k_cache, v_cache, self._many[(gi, key)], items, out, lse, scale=scale,
                                  window=window, softcap=softcap, meta=meta)

    def _decode(
        self, gi: int, q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, warm: WarmPages | None,
        scale: float, window: int | None, softcap: float | None, return_lse: bool,
    ) -> AttentionOutput:
        tables, lens = self.decode_block_tables[gi], self.decode_kv_lens
        if warm is not None and not self.warm_always:  # (the check reads the tables back to the host)
            if gi not in self._warm_decode:
                self._warm_decode[gi] = bool((tables <= -2).any())
            if not self._warm_decode[gi]:
                warm = None
        top_k = self.cache.sparse_top_k
        if warm is not None and top_k is not None and window is None and not return_lse:
            tables, lens = sparse.select_blocks(q, tables, lens, warm, top_k, self.cache.block_size)
        return self.backend.decode(
            q, k_cache, v_cache, tables, lens, scale=scale, window=window, softcap=softcap, return_lse=return_lse,
            warm=warm,
        )

    def rope_write(
        self, layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
    ) -> tuple[torch.Tensor, torch.Tensor | None] | None:
        """On the Triton path: rotate q and k and write k and v into this layer's cache slots in one
        launch (longdoc_kernels/rope_kv.py, float32 rotation); return the rotated q and, in a step
        with prefill chunks (whose attention over their fresh keys reads them), the rotated k. The
        caller then calls `attend(..., written=True)`. None where the unfused path must run
        (attribution capture, which records the unfused path's values; the CPU). A 32K-token prefill
        of Gemma 3 270M: ~8 ms of the H100's 55 ms were the unfused rotation's and cache write's
        elementwise kernels (BENCHMARKS.md)."""
        if self.capture is not None and layer in self.capture.layers:
            return None
        from longdoc_kernels import dispatch

        if not dispatch.fused_path(q):
            return None
        gi, k_cache, v_cache = self.cache.layer_cache(layer)
        half = q.shape[-1] // 2
        prefill = bool(self.prefills)  # a decode step's attention reads its keys from the cache
        out = dispatch.rope_and_cache_write(q, k, v, cos[:, :half], sin[:, :half], k_cache, v_cache,
                                            self.slot_mappings[gi], return_k=prefill)
        return out if prefill else (out, None)

    def cpu_rope_write(
        self, layer: int, qkv: torch.Tensor, heads: int, kv_heads: int, w: torch.Tensor | None, eps: float,
        cos: torch.Tensor, sin: torch.Tensor,
    ) -> torch.Tensor | None:
        """On the CPU, with the C kernels (longdoc_kernels/cpu): q and k normed (w: each head's norm
        weight, None for no q/k norm) and rotated, and k and v written to this layer's cache slots,
        in one call; returns q and k rotated, [T, heads + kv_heads, head_dim], and the caller then
        calls `attend(..., written=True)`. None where the unfused path must run (attribution capture,
        which records its values; no kernels; a layout the kernel declines)."""
        if self.capture is not None and layer in self.capture.layers:
            return None
        kernels = cpu_kernels()
        if kernels is None:
            return None
        gi, k_cache, v_cache = self.cache.layer_cache(layer)
        return kernels.qk_rope_write(qkv, heads, kv_heads, w, eps, cos, sin, k_cache, v_cache, self.slot_mappings[gi])

    def attend(
        self,
        layer: int,
        window: int | None,
        scale: float,
        softcap: float | None,
        q: torch.Tensor,
        k: torch.Tensor | None,
        v: torch.Tensor | None,
        written: bool = False,
    ) -> torch.Tensor:
        """Write this layer's new K/V into the cache (unless `rope_write` did: `written`, or k and v
        None) and return attention output [T, heads, head_dim]."""
        gi, k_cache, v_cache = self.cache.layer_cache(layer)
        warm = self.cache.layer_warm(layer)
        if k is not None and not written:
            slots = self.slot_mappings[gi]
            k_cache.view(-1, *k.shape[1:]).index_copy_(0, slots, k.to(k_cache.dtype))
            v_cache.view(-1, *v.shape[1:]).index_copy_(0, slots, v.to(v_cache.dtype))
        capture = self.capture is not None and layer in self.capture.layers
        t = q.shape[0]
        n_decode = t - self.decode_start
        if len(self.prefills) == 1 and n_decode == 0 and not capture:
            p = self.prefills[0]
            if p.q_offset == 0:
                fresh = self.backend.prefill_fresh(q, _as_stored(k, k_cache), _as_stored(v, v_cache), scale=scale,
                                                   window=window, softcap=softcap)
                if fresh is not None:
                    return fresh
            return self.backend.prefill(
                q, k_cache, v_cache, p.block_tables[gi], q_offset=p.q_offset, kv_len=p.q_offset + p.length,
                scale=scale, window=window, softcap=softcap, warm=self._prefill_warm(0, gi, warm),
            ).out
        if not self.prefills and not capture:
            return self._decode(gi, q, k_cache, v_cache, warm, scale, window, softcap, False).out
        out = torch.empty_like(q)
        lse = torch.empty(q.shape[:2], dtype=torch.float32, device=q.device) if capture else None
        together: list[int] = []  # items for one prefill_many call
        for i, p in enumerate(self.prefills):
            rows = slice(p.start, p.start + p.length)
            if p.q_offset == 0 and not capture:
                fresh = self.backend.prefill_fresh(q[rows], _as_stored(k[rows], k_cache), _as_stored(v[rows], v_cache),
                                                   scale=scale, window=window, softcap=softcap)
                if fresh is not None:
                    out[rows] = fresh
                    continue
            item_warm = self._prefill_warm(i, gi, warm)
            if item_warm is None and (capture or not self.backend.prefers_alone(q, p.length, window, softcap)):
                together.append(i)
                continue
            r = self.backend.prefill(
                q[rows], k_cache, v_cache, p.block_tables[gi], q_offset=p.q_offset,
                kv_len=p.q_offset + p.length, scale=scale, window=window, softcap=softcap, return_lse=capture,
                warm=item_warm,
            )
            out[rows] = r.out
            if capture:
                lse[rows] = r.lse
        if together:
            self._prefill_many(gi, together, q, k_cache, v_cache, out, lse, scale, window, softcap)
        if n_decode:
            r = self._decode(gi, q[self.decode_start :], k_cache, v_cache, warm, scale, window, softcap, capture)
            out[self.decode_start :] = r.out
            if capture:
                lse[self.decode_start :] = r.lse
        if capture:
            rows = self.capture.rows
            self.capture.q[layer] = q[rows].detach().clone()
            self.capture.lse[layer] = lse[rows].clone()
        return out
