"""What one forward pass needs to know about its batch: which rows of the flat token batch belong to
which sequence, where their K/V go in the paged cache (slot mappings), which blocks they read
(block tables), and the attention backend. Built by the model runner, read by every attention layer.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from engine.attention import AttentionBackend
from engine.kv_cache import PagedKVCache


@dataclass
class PrefillItem:
    """A chunk of one sequence's prompt: rows start..start+length-1 of the batch, at global positions
    q_offset..q_offset+length-1; kv_len = q_offset + length tokens are cached after the write."""

    start: int
    length: int
    q_offset: int
    block_tables: list[torch.Tensor]  # one per cache group


@dataclass
class Capture:
    """Attribution: keep q and the log-sum-exp of rows `rows` (batch rows) at layers `layers`."""

    layers: set[int]
    rows: slice
    q: dict[int, torch.Tensor] = field(default_factory=dict)
    lse: dict[int, torch.Tensor] = field(default_factory=dict)


@dataclass
class ForwardContext:
    cache: PagedKVCache
    backend: AttentionBackend
    slot_mappings: list[torch.Tensor]  # per group: slot id of every batch row
    prefills: list[PrefillItem]
    decode_start: int = 0  # rows decode_start.. are decode rows, one per sequence
    decode_block_tables: list[torch.Tensor] | None = None  # per group: [B, max_blocks], -1 padded
    decode_kv_lens: torch.Tensor | None = None  # [B]
    rope_seq_lens: torch.Tensor | None = None  # [T], dynamic NTK RoPE only
    capture: Capture | None = None

    def attend(
        self,
        layer: int,
        window: int | None,
        scale: float,
        softcap: float | None,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
    ) -> torch.Tensor:
        """Write this layer's new K/V into the cache and return attention output [T, heads, head_dim]."""
        gi, k_cache, v_cache = self.cache.layer_cache(layer)
        slots = self.slot_mappings[gi]
        k_cache.view(-1, *k.shape[1:]).index_copy_(0, slots, k)
        v_cache.view(-1, *v.shape[1:]).index_copy_(0, slots, v)
        capture = self.capture is not None and layer in self.capture.layers
        t = q.shape[0]
        n_decode = t - self.decode_start
        if len(self.prefills) == 1 and n_decode == 0 and not capture:
            p = self.prefills[0]
            return self.backend.prefill(
                q, k_cache, v_cache, p.block_tables[gi], q_offset=p.q_offset, kv_len=p.q_offset + p.length,
                scale=scale, window=window, softcap=softcap,
            ).out
        if not self.prefills and not capture:
            return self.backend.decode(
                q, k_cache, v_cache, self.decode_block_tables[gi], self.decode_kv_lens,
                scale=scale, window=window, softcap=softcap,
            ).out
        out = torch.empty_like(q)
        lse = torch.empty(q.shape[:2], dtype=torch.float32, device=q.device) if capture else None
        for p in self.prefills:
            r = self.backend.prefill(
                q[p.start : p.start + p.length], k_cache, v_cache, p.block_tables[gi], q_offset=p.q_offset,
                kv_len=p.q_offset + p.length, scale=scale, window=window, softcap=softcap, return_lse=capture,
            )
            out[p.start : p.start + p.length] = r.out
            if capture:
                lse[p.start : p.start + p.length] = r.lse
        if n_decode:
            r = self.backend.decode(
                q[self.decode_start :], k_cache, v_cache, self.decode_block_tables[gi], self.decode_kv_lens,
                scale=scale, window=window, softcap=softcap, return_lse=capture,
            )
            out[self.decode_start :] = r.out
            if capture:
                lse[self.decode_start :] = r.lse
        if capture:
            rows = self.capture.rows
            self.capture.q[layer] = q[rows].detach().clone()
            self.capture.lse[layer] = lse[rows].clone()
        return out
