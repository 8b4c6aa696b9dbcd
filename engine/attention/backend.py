"""The attention backend interface and its torch reference implementation.

A backend reads queries for the new tokens and keys/values from the paged KV cache of one layer
(`k_cache`, `v_cache`: [num_blocks, block_size, kv_heads, head_dim]) through a block table, and
returns the attention output and, on request, the per-row log-sum-exp of the scaled scores (after
soft-capping), which attribution reuses to turn a query-key score into a probability:
p = exp(scale * q.k - lse).

Two entry points, the same for the torch reference (here) and the Triton backend
(engine/attention/triton_backend.py, over longdoc_kernels/):

- `prefill`: the queries of one sequence's chunk at global positions q_offset .. q_offset+Tq-1,
  attending to cached positions 0 .. kv_len-1 (the chunk's own keys already written), causal,
  optionally limited to a sliding window (key allowed iff q - window < k <= q).
- `decode`: one query per sequence for a batch of sequences of different lengths.

Block table entries of blocks a sliding window can no longer see may be -1 (freed); a backend
never reads them. Entries <= -2 name INT8 blocks of the warm tier (block -entry - 2 of the layer's
`WarmPages`, passed as `warm`); a caller passes `warm=None` when no table of the call has such an
entry, and the backend then runs its plain full-precision path.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F

from longdoc_kernels import dispatch
from longdoc_kernels.cpu import available as cpu_kernels  # the C kernels, or None

if TYPE_CHECKING:
    from engine.kv.warm_tier import WarmPages


@dataclass
class AttentionOutput:
    """out: [rows, heads, head_dim] in the query dtype; lse: [rows, heads] float32, or None."""

    out: torch.Tensor
    lse: torch.Tensor | None = None


class AttentionBackend(ABC):
    """What a model layer needs from an attention implementation over the paged KV cache."""

    name: str = "abstract"

    @abstractmethod
    def prefill(
        self,
        q: torch.Tensor,
        k_cache: torch.Tensor,
        v_cache: torch.Tensor,
        block_table: torch.Tensor,
        *,
        q_offset: int,
        kv_len: int,
        scale: float,
        window: int | None = None,
        softcap: float | None = None,
        return_lse: bool = False,
        warm: WarmPages | None = None,
    ) -> AttentionOutput:
        """Attention of q [Tq, heads, head_dim] (positions q_offset..) over one sequence's cache."""

    @abstractmethod
    def decode(
        self,
        q: torch.Tensor,
        k_cache: torch.Tensor,
        v_cache: torch.Tensor,
        block_tables: torch.Tensor,
        kv_lens: torch.Tensor,
        *,
        scale: float,
        window: int | None = None,
        softcap: float | None = None,
        return_lse: bool = False,
        warm: WarmPages | None = None,
    ) -> AttentionOutput:
        """One query per sequence: q [B, heads, head_dim], block_tables [B, max_blocks] (-1 padded),
        kv_lens [B] (including the token being decoded, whose K/V is already in the cache)."""

    def prefill_many(
        self,
        q: torch.Tensor,
        k_cache: torch.Tensor,
        v_cache: torch.Tensor,
        tables: torch.Tensor,
        items: list[tuple[int, int, int]],
        out: torch.Tensor,
        lse: torch.Tensor | None,
        *,
        scale: float,
        window: int | None = None,
        softcap: float | None = None,
        meta: dict | None = None,
    ) -> None:
        """The chunks of several sequences in one call: chunk i = items[i] = (first row of q, rows,
        q_offset) reads block table row i of tables [n, max_blocks] (-1 padded); its rows of `out`
        (and of `lse` when given) are written, other rows left alone. No warm entries. `meta`: a dict
        the caller keeps across the layers of one forward for what a backend derives from `items`.
        This default runs `prefill` chunk by chunk; the Triton backend runs one launch."""
        for i, (start, n, off) in enumerate(items):
            if n:
                r = self.prefill(q[start : start + n], k_cache, v_cache, tables[i], q_offset=off, kv_len=off + n,
                                 scale=scale, window=window, softcap=softcap, return_lse=lse is not None)
                out[start : start + n] = r.out
                if lse is not None:
                    lse[start : start + n] = r.lse

    def prefers_alone(self, q: torch.Tensor, rows: int, window: int | None, softcap: float | None) -> bool:
        """Whether a chunk of `rows` query rows (like `q`) after a cached prefix runs faster through
        `prefill` on its own than inside a `prefill_many` call with other chunks (default: no)."""
        return False

    def prefill_fresh(
        self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, scale: float, window: int | None = None,
        softcap: float | None = None,
    ) -> torch.Tensor | None:
        """Optional fast path for a chunk with nothing cached before it (q_offset 0): causal
        attention of q [T, heads, D] over the chunk's own k, v [T, kv_heads, D], which are also in
        the cache. Returns out [T, heads, D], or None when this backend has no faster way than
        `prefill` for the case (the default)."""
        return None


def gather_blocks(
    k_cache: torch.Tensor, v_cache: torch.Tensor, blocks: torch.Tensor, warm: WarmPages | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """K and V of the table entries `blocks` [n] as [n, block_size, kv_heads, head_dim] in the pool's
    dtype: hot entries copied, warm entries (<= -2) dequantised, -1 entries read as hot block 0
    (the caller masks them). Without `warm` this is one index_select each. On the CPU, entries that
    are one run of consecutive hot blocks (a sequence's blocks as a fresh pool hands them out) are
    returned as views of the pools, not copied: the same values in the same layout, so whatever
    reads them computes the same, without the copy (1K keys of Gemma 3 270M: 36 copies of 1 MB a
    decode step). The views must not be written to."""
    n = blocks.shape[0]
    if n and blocks.device.type == "cpu":
        first = int(blocks[0])
        if 0 <= first <= k_cache.shape[0] - n and torch.equal(blocks, torch.arange(first, first + n, dtype=blocks.dtype)):
            return k_cache[first : first + n], v_cache[first : first + n]
    if warm is None:
        return k_cache.index_select(0, blocks), v_cache.index_select(0, blocks)
    if blocks.device.type == "cuda":
        # without a host wait: one Triton launch for K and V, each entry read from the tier it names
        # (the sparse form below waits on `nonzero` once per chunk and global layer: 16 x 32K Gemma,
        # H100, 356 ms of host time against 159 ms of GPU time; BENCHMARKS.md "The warm tier, first
        # batches and CPU decode"). On the CPU, where bytes are the cost, the sparse form stays.
        return dispatch.gather_blocks_tiered(k_cache, v_cache, blocks, warm.kq, warm.vq, warm.ks, warm.vs)
    k = k_cache.index_select(0, blocks.clamp(min=0))
    v = v_cache.index_select(0, blocks.clamp(min=0))
    rows = torch.nonzero(blocks <= -2).squeeze(1)
    if rows.numel():
        w = -blocks.index_select(0, rows) - 2
        k.index_copy_(0, rows, dispatch.dequantize_blocks(warm.kq.index_select(0, w), warm.ks.index_select(0, w), k.dtype))
        v.index_copy_(0, rows, dispatch.dequantize_blocks(warm.vq.index_select(0, w), warm.vs.index_select(0, w), v.dtype))
    return k, v


def _one_query(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float,
               mask: torch.Tensor | None = None) -> torch.Tensor:
    """One query row per head and sequence: q [B, H, 1, D], k/v [B, KVH, L, D], mask None or
    [B, 1, 1, L] (True = allowed; every row allows one key at least) -> [B, H, 1, D], as two matrix
    products per kv head (its query heads stacked as rows). On the CPU torch's fused SDPA is slow
    for a single query: one thread, 4 heads of 256 over 8,192 keys, 6.4 ms against 2.4 ms here,
    37.6 against 13.2 ms over 32,768; 3 sequences over 8,192 keys with a mask 19.3 against 8.5 ms
    (BENCHMARKS.md, "CPU decode")."""
    b, h, _, d = q.shape
    kvh = k.shape[1]
    qg = q.float().reshape(b, kvh, h // kvh, d)  # head i reads kv head i // (h // kvh); float32 (a no-op in float32)
    if kvh == 1:
        # one kv head: its keys are one [L, D] matrix with contiguous rows; multiplied as they lie
        # (keys x queries^T) they read faster than as a transposed right operand: 4 heads of 256
        # over 512 / 1,024 keys, 18 layers' worth, 147 / 439 us a layer against 191 / 513 (one
        # thread), 117 / 202 against 191 / 347 (two); with 8 kv heads the other way round (877 against
        # 708 us), so they keep the form below (a throwaway timing, 2026-12-06, AMD EPYC)
        s = torch.matmul(k.float(), qg.transpose(-1, -2)).transpose(-1, -2) * scale
    else:
        s = torch.matmul(qg, k.float().transpose(-1, -2)) * scale  # [B, KVH, G, L]
    if mask is not None:
        s = s.masked_fill(~mask.reshape(b, 1, 1, -1), float("-inf"))
    return torch.matmul(torch.softmax(s, dim=-1), v.float()).reshape(b, h, 1, d).to(q.dtype)


def _explicit(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None, scale: float, softcap: float | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Attention with materialised scores. q [B, H, Tq, D], k/v [B, KVH, L, D], mask broadcastable
    to [B, H, Tq, L] (True = allowed). Returns out [B, H, Tq, D] and lse [B, H, Tq] (float32)."""
    b, h, tq, d = q.shape
    kvh = k.shape[1]
    qg = q.float().reshape(b, kvh, h // kvh, tq, d)
    s = torch.einsum("bgrqd,bgkd->bgrqk", qg, k.float()) * scale
    if softcap is not None:
        s = torch.tanh(s / softcap) * softcap
    s = s.reshape(b, h, tq, -1)
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    lse = torch.logsumexp(s, dim=-1)
    p = torch.exp(s - lse[..., None]).to(q.dtype)
    pg = p.reshape(b, kvh, h // kvh, tq, -1)
    out = torch.einsum("bgrqk,bgkd->bgrqd", pg, v.to(q.dtype)).reshape(b, h, tq, d)
    return out, lse


class TorchAttentionBackend(AttentionBackend):
    """Reference backend: gathers the sequence's blocks into contiguous K/V (index_select on the block
    table) and calls torch's scaled_dot_product_attention; materialises scores only when the
    log-sum-exp or soft-capping is asked for. Sliding-window prefill is tiled so that blocks a tile
    cannot see are never gathered or computed."""

    name = "torch"

    def __init__(self, window_tile: int | None = None, sdpa_dtype: torch.dtype | None = None,
                 few_rows: int = 2) -> None:
        self.window_tile = window_tile
        # prefill chunks' fused attention in this dtype (q, K, V cast, the output cast back), where
        # the engine already multiplies in it: int8 weights on a CPU with bfloat16 GEMMs
        # (engine/model/quant.py: bf16_gemm). One thread, 4 heads of 256 over 2,048 keys: 70 ms in
        # float32, 19 ms in bfloat16. Decode rows and log-sum-exp captures stay in the cache's dtype.
        self.sdpa_dtype = sdpa_dtype
        # CPU chunks of fewer query rows than this (a prompt's short tail, speculative verification)
        # are computed row by row exactly as decode steps compute them, in the cache's dtype, and
        # a batch's decode rows sequence by sequence as each is computed alone (2: neither)
        self.few_rows = max(2, few_rows)

    def prefill(
        self,
        q: torch.Tensor,
        k_cache: torch.Tensor,
        v_cache: torch.Tensor,
        block_table: torch.Tensor,
        *,
        q_offset: int,
        kv_len: int,
        scale: float,
        window: int | None = None,
        softcap: float | None = None,
        return_lse: bool = False,
        warm: WarmPages | None = None,
    ) -> AttentionOutput:
        tq = q.shape[0]
        if window is not None and tq > window:
            tile = self.window_tile or window
            outs, lses = [], []
            for s in range(0, tq, tile):
                e = min(tq, s + tile)
                r = self._prefill_tile(
                    q[s:e], k_cache, v_cache, block_table, q_offset + s, q_offset + e, scale, window, softcap, return_lse,
                    warm,
                )
                outs.append(r.out)
                lses.append(r.lse)
            return AttentionOutput(torch.cat(outs), torch.cat(lses) if return_lse else None)
        return self._prefill_tile(
            q, k_cache, v_cache, block_table, q_offset, kv_len, scale, window, softcap, return_lse, warm
        )

    def _prefill_tile(
        self,
        q: torch.Tensor,
        k_cache: torch.Tensor,
        v_cache: torch.Tensor,
        block_table: torch.Tensor,
        q_offset: int,
        kv_len: int,
        scale: float,
        window: int | None,
        softcap: float | None,
        return_lse: bool,
        warm: WarmPages | None = None,
    ) -> AttentionOutput:
        bs = k_cache.shape[1]
        tq = q.shape[0]
        first = 0 if window is None else max(0, q_offset - window + 1)  # first key the tile can see
        b0, b1 = first // bs, (kv_len + bs - 1) // bs
        blocks = block_table[b0:b1]
        few = (q.device.type == "cpu" and 1 < tq < self.few_rows and tq == kv_len - q_offset
               and not return_lse and softcap is None)
        if few and (kernels := cpu_kernels()) is not None:
            # the C kernel (longdoc_kernels/cpu), row i as the decode step at its position computes it
            lens = torch.arange(q_offset + 1, kv_len + 1)
            table = block_table.to(torch.int64).unsqueeze(0).expand(tq, -1)
            out = kernels.decode_attention(q, k_cache, v_cache, table, lens, scale, window)
            if out is not None:
                return AttentionOutput(out)
        kb, vb = gather_blocks(k_cache, v_cache, blocks, warm)
        if few:
            # a few rows (a prompt's short tail, speculative verification: engine/core/speculative.py):
            # each row as the decode step computes it (keys first..its position, `_one_query`), so a
            # verified token is the one plain decoding picks; the chunk's blocks are gathered once
            kf, vf = kb.flatten(0, 1), vb.flatten(0, 1)
            outs = []
            for i in range(tq):
                p = q_offset + i
                lo = (0 if window is None else max(0, p - window + 1)) - b0 * bs
                kh = kf[lo : p + 1 - b0 * bs].transpose(0, 1).unsqueeze(0)
                vh = vf[lo : p + 1 - b0 * bs].transpose(0, 1).unsqueeze(0)
                outs.append(_one_query(q[i : i + 1].transpose(0, 1).unsqueeze(0), kh, vh, scale)[0].transpose(0, 1))
            return AttentionOutput(torch.cat(outs))
        k = kb.flatten(0, 1)[first - b0 * bs : kv_len - b0 * bs]
        v = vb.flatten(0, 1)[first - b0 * bs : kv_len - b0 * bs]
        if k.dtype != q.dtype and not (tq == 1 and q.device.type == "cpu" and not return_lse and softcap is None):
            # pages of another dtype (CacheConfig.kv_dtype: 16-bit on the CPU) widened for the fused
            # attention (exact; `_one_query` widens a single row's keys itself)
            k, v = k.to(q.dtype), v.to(q.dtype)
        qh = q.transpose(0, 1).unsqueeze(0)  # [1, H, Tq, D]
        kh = k.transpose(0, 1).unsqueeze(0)
        vh = v.transpose(0, 1).unsqueeze(0)
        mask = None
        causal_plain = window is None and q_offset == 0 and tq == kv_len
        # a single query (decode) sees every key in [first, kv_len): no mask at all
        if (tq > 1 and not causal_plain) or return_lse or softcap is not None:
            qpos = torch.arange(q_offset, q_offset + tq, device=q.device)
            kpos = torch.arange(first, kv_len, device=q.device)
            mask = kpos[None, :] <= qpos[:, None]
            if window is not None:
                mask &= kpos[None, :] > (qpos[:, None] - window)
        if return_lse or softcap is not None:
            out, lse = _explicit(qh, kh, vh, mask, scale, softcap)
            return AttentionOutput(out[0].transpose(0, 1), lse[0].transpose(0, 1) if return_lse else None)
        if tq == 1 and mask is None and q.device.type == "cpu":
            return AttentionOutput(_one_query(qh, kh, vh, scale)[0].transpose(0, 1))
        gqa = kh.shape[1] != qh.shape[1]
        dt = self.sdpa_dtype
        if dt is not None and tq > 1 and qh.dtype != dt:
            out = F.scaled_dot_product_attention(
                qh.to(dt), kh.to(dt), vh.to(dt), attn_mask=mask, is_causal=causal_plain, scale=scale, enable_gqa=gqa
            ).to(q.dtype)
        else:
            out = F.scaled_dot_product_attention(
                qh, kh, vh, attn_mask=mask, is_causal=causal_plain, scale=scale, enable_gqa=gqa
            )
        return AttentionOutput(out[0].transpose(0, 1))

    def decode(
        self,
        q: torch.Tensor,
        k_cache: torch.Tensor,
        v_cache: torch.Tensor,
        block_tables: torch.Tensor,
        kv_lens: torch.Tensor,
        *,
        scale: float,
        window: int | None = None,
        softcap: float | None = None,
        return_lse: bool = False,
        warm: WarmPages | None = None,
    ) -> AttentionOutput:
        bs = k_cache.shape[1]
        b = q.shape[0]
        dev = q.device
        if dev.type == "cpu" and not return_lse and (kernels := cpu_kernels()) is not None:
            # the C kernel (longdoc_kernels/cpu): each sequence's keys read in place through its
            # table, in one call for the batch; None where it does not apply (a warm-tier entry)
            out = kernels.decode_attention(q, k_cache, v_cache, block_tables.to(torch.int64), kv_lens, scale, window,
                                           softcap)
            if out is not None:
                return AttentionOutput(out)
        if b == 1:  # one sequence: gather exactly its visible keys, no padding, no mask
            n = int(kv_lens[0])
            r = self._prefill_tile(
                q, k_cache, v_cache, block_tables[0], n - 1, n, scale, window, softcap, return_lse, warm
            )
            return r
        if self.few_rows > 2 and dev.type == "cpu" and not return_lse and softcap is None:
            # sequence by sequence, each as it is computed alone: a request's tokens do not depend on
            # what it is batched with (int8 weights: the kernels' rows are independent too)
            outs = [self._prefill_tile(q[i : i + 1], k_cache, v_cache, block_tables[i], n - 1, n, scale, window,
                                       None, False, warm).out for i, n in enumerate(kv_lens.tolist())]
            return AttentionOutput(torch.cat(outs))
        if window is None:
            first_blk = torch.zeros_like(kv_lens)
        else:
            first_blk = torch.clamp(kv_lens - window, min=0) // bs
        last_blk = (kv_lens + bs - 1) // bs
        counts = last_blk - first_blk
        j = int(counts.max())
        cols = first_blk[:, None] + torch.arange(j, device=dev)[None, :]
        valid_col = cols < last_blk[:, None]
        cols = cols.clamp(max=block_tables.shape[1] - 1)
        blk = block_tables.gather(1, cols)
        present = (blk >= 0) | (blk <= -2) if warm is not None else blk >= 0
        blk = torch.where(valid_col & present, blk, torch.zeros_like(blk))
        flat = blk.reshape(-1)  # index_select: advanced indexing k_cache[blk] is far slower on CPU
        k, v = gather_blocks(k_cache, v_cache, flat, warm)
        k = k.view(b, j * bs, *k_cache.shape[2:])  # [B, J*bs, KVH, D]
        v = v.view(b, j * bs, *v_cache.shape[2:])
        kpos = first_blk[:, None] * bs + torch.arange(j * bs, device=dev)[None, :]
        qpos = (kv_lens - 1)[:, None]
        mask = kpos <= qpos
        if window is not None:
            mask &= kpos > qpos - window
        # Slots past a sequence's length may never have been written (the pools are allocated with
        # torch.empty): zero K and V there, so that garbage (NaN, inf) cannot leak through the mask.
        zero = torch.zeros((), dtype=v.dtype, device=dev)
        k = torch.where(mask[:, :, None, None], k, zero)
        v = torch.where(mask[:, :, None, None], v, zero)
        mask = mask[:, None, None, :]  # [B, 1, 1, L]
        qh = q.unsqueeze(2)  # [B, H, 1, D]
        kh, vh = k.transpose(1, 2), v.transpose(1, 2)
        if return_lse or softcap is not None:
            out, lse = _explicit(qh, kh, vh, mask, scale, softcap)
            return AttentionOutput(out[:, :, 0], lse[:, :, 0] if return_lse else None)
        gqa = kh.shape[1] != qh.shape[1]
        if b == 1 and bool(mask.all()):
            mask = None
        if dev.type == "cpu":
            return AttentionOutput(_one_query(qh, kh, vh, scale, mask)[:, :, 0])
        out = F.scaled_dot_product_attention(qh, kh, vh, attn_mask=mask, scale=scale, enable_gqa=gqa)
        return AttentionOutput(out[:, :, 0])
