"""The Triton attention backend: the engine's `AttentionBackend` over the kernels in longdoc_kernels/.

On CUDA tensors it runs `longdoc_kernels.paged_attention` (flash-style prefill that skips the tiles a
sliding window cannot see; split-context decode); anywhere else (CPU, no Triton) it hands the
call to the torch reference backend, so a model built with it runs everywhere. Both return the
per-row log-sum-exp when asked, so attribution works the same on either path.

Warm (INT8) blocks: decode hands the layer's INT8 pools and scales to the decode kernel, which reads
the int8 values as they are and applies the per-(block, head) scales to the dot products. A prefill
chunk whose visible blocks include warm ones gathers every visible block (hot copied, warm
dequantised) into a temporary buffer each chunk and layer, and runs the prefill kernel on that.
The prefill kernel can read the INT8 pages directly as the decode kernel does
(`prefill_reads_int8=True`, or LONGDOC_PREFILL_READS_INT8=1): it matches the reference under the
interpreter (tests/longdoc_kernels) and passed the GPU tests with 2 pipeline stages (H100,
2026-12-05; the illegal memory access first blamed on it was the decode kernel's table over-read,
since fixed). It stays off by default until it is measured faster than dequantising at the
engine's shapes: the first e2e run put warm pages read directly at 1.37x bf16 pages' TTFT at b16
(BENCHMARKS.md).
"""

from __future__ import annotations

import os

import torch
import torch.nn.functional as F

from engine.attention.backend import AttentionBackend, AttentionOutput, TorchAttentionBackend, gather_blocks
from engine.kv.warm_tier import WarmPages
from longdoc_kernels import dispatch


class TritonAttentionBackend(AttentionBackend):
    """`sdpa_prefill`: causal chunks with nothing cached before them (a prompt's first chunk, or a
    whole prompt prefilled in one chunk) run through a fused attention kernel over the chunk's own
    K/V instead of the paged Triton kernel. `prefix_sdpa` (on unless LONGDOC_PREFIX_SDPA=0): a chunk
    after a cached prefix runs the same way over its visible blocks gathered into one contiguous K/V,
    so a long prompt's later chunks no longer fall back to the paged kernel; in a step of several
    chunks the long ones (`prefers_alone`) go this way one by one, the short ones together through
    one varlen paged launch. The fused kernel is cuDNN's for head_dim <= CUDNN_MAX_HEAD_DIM (on an
    H100 at the Llama-3-8B shape torch's FlashAttention-2 ran at ~310-325 TFLOP/s where
    transformers' cuDNN call ran at ~580, BENCHMARKS.md "The user path on the H100"), torch's
    flash / memory-efficient SDPA otherwise (cuDNN's plan per new length costs seconds at
    head_dim 256). Sliding-window layers, soft-capping and attribution (which needs the
    log-sum-exp) keep the Triton kernels."""

    name = "triton"
    SDPA_MIN_TOKENS = 256  # below this a chunk's attention costs next to nothing either way
    CUDNN_MAX_HEAD_DIM = 128
    # auto: measured on an H100 (2026-12-06), the Llama-3-8B shape's 32K / 128K prefill 1.63 / 16.7 s
    # with flash, 1.40 / 11.37 s with cuDNN (transformers 1.40 / 11.73); BENCHMARKS.md
    CUDNN_DEFAULT = "auto"

    def __init__(self, sdpa_prefill: bool = True, prefill_reads_int8: bool | None = None,
                 prefix_sdpa: bool | None = None) -> None:
        self.fallback = TorchAttentionBackend()
        self.sdpa_prefill = sdpa_prefill
        if prefix_sdpa is None:  # LONGDOC_PREFIX_SDPA=0 keeps chunks after a prefix on the paged kernel
            prefix_sdpa = os.environ.get("LONGDOC_PREFIX_SDPA", "1") == "1"
        self.prefix_sdpa = prefix_sdpa
        # cuDNN's fused attention (Hopper's wgmma kernels: on an H100 ~580 TFLOP/s where torch's
        # FlashAttention-2 reaches ~310-325 at the Llama-3-8B shape, BENCHMARKS.md) for head_dim up
        # to CUDNN_MAX_HEAD_DIM; off for larger heads, whose plans cost seconds per new length
        # (Gemma 3's 256). LONGDOC_SDPA_CUDNN=0 turns it off, =1 on for every head_dim, =auto (the
        # default, CUDNN_DEFAULT) by head_dim.
        mode = os.environ.get("LONGDOC_SDPA_CUDNN", self.CUDNN_DEFAULT)  # "0", "1" or "auto"
        self.cudnn = {"0": False, "1": True}.get(mode)  # None: auto, by head_dim
        self._cudnn_failed: set[tuple] = set()
        if prefill_reads_int8 is None:  # LONGDOC_PREFILL_READS_INT8=0/1
            prefill_reads_int8 = os.environ.get("LONGDOC_PREFILL_READS_INT8", "0") == "1"
        self.prefill_reads_int8 = prefill_reads_int8  # False (default): dequantise the visible blocks into a buffer
        self._sdpa_failed: set[tuple] = set()  # (head_dim, dtype, after a prefix) torch had no fused kernel for

    def prefill_fresh(self, q, k, v, *, scale, window=None, softcap=None):
        if not self._fused_ok(q, window, softcap):
            return None
        return self._fused(q, k, v, scale)

    def _fused_ok(self, q, window, softcap, rows: int | None = None) -> bool:
        return (self.sdpa_prefill and q.device.type == "cuda" and window is None and softcap is None
                and (q.shape[0] if rows is None else rows) >= self.SDPA_MIN_TOKENS
                and q.dtype in (torch.bfloat16, torch.float16))

    def prefers_alone(self, q, rows, window, softcap) -> bool:
        # a long chunk after a prefix: flash over its gathered prefix beats the varlen paged kernel
        return self.prefix_sdpa and self._fused_ok(q, window, softcap, rows)

    def _fused(self, q, k, v, scale):
        """Causal attention of q over k, v (`sdpa_causal`'s contract) through cuDNN (`sdpa_cudnn`, by
        `self.cudnn` and head_dim), else torch's flash / memory-efficient SDPA; None where none of
        them takes the case (remembered per head_dim, dtype and whether a prefix precedes)."""
        from torch.nn.attention import SDPBackend, sdpa_kernel

        key = (q.shape[-1], q.dtype, k.shape[0] > q.shape[0])
        use_cudnn = self.cudnn if self.cudnn is not None else q.shape[-1] <= self.CUDNN_MAX_HEAD_DIM
        if use_cudnn and key not in self._cudnn_failed:
            try:
                return sdpa_cudnn(q, k, v, scale)
            except torch.OutOfMemoryError:  # this call only (its K/V heads repeated): flash needs no copy
                pass
            except RuntimeError:  # cuDNN does not take the case: not asked again in this process
                self._cudnn_failed.add(key)
        if key in self._sdpa_failed:
            return None
        # flash / memory-efficient only: never the math path, which would materialise Tq x Tk
        # scores; and not cuDNN through this door, where it would take head_dim 256 too (its plan per
        # new length: 1.4 s of a 1.5 s 8K request on the H200, BENCHMARKS.md "First request after
        # warmup")
        try:
            with sdpa_kernel([SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION]):
                return sdpa_causal(q, k, v, scale)
        except torch.OutOfMemoryError:  # this call only: the paged kernel then runs
            return None
        except RuntimeError:
            self._sdpa_failed.add(key)
            return None

    def prefill(self, q, k_cache, v_cache, block_table, *, q_offset, kv_len, scale, window=None, softcap=None,
                return_lse=False, warm: WarmPages | None = None):
        if not dispatch.use_triton(q.device):
            return self.fallback.prefill(q, k_cache, v_cache, block_table, q_offset=q_offset, kv_len=kv_len, scale=scale,
                                         window=window, softcap=softcap, return_lse=return_lse, warm=warm)
        if (self.prefix_sdpa and not return_lse and self._fused_ok(q, window, softcap)
                and not (warm is not None and self.prefill_reads_int8)):
            # a chunk after a cached prefix (a long prompt's second chunk on): the visible blocks
            # gathered into one contiguous K/V (warm ones dequantised), then fused attention with the
            # causal diagonal at the bottom right, as one call over the whole prompt would compute
            try:
                k, v = contiguous_prefix(k_cache, v_cache, block_table, kv_len, warm)
            except torch.OutOfMemoryError:  # no room for the gathered prefix: the paged kernel needs none
                k = v = None
            out = None if k is None else self._fused(q, k, v, scale)
            del k, v
            if out is not None:
                return AttentionOutput(out)
        extra = {}
        if warm is not None and self.prefill_reads_int8:
            extra = dict(k_cache_int8=warm.kq, v_cache_int8=warm.vq, k_scale=warm.ks, v_scale=warm.vs)
        elif warm is not None:
            k_cache, v_cache, block_table = _dequantised_view(k_cache, v_cache, block_table, q_offset, kv_len, window, warm)
        out, lse = dispatch.paged_prefill(q, k_cache, v_cache, block_table, q_offset=q_offset, kv_len=kv_len, scale=scale,
                                          window=window, softcap=softcap, **extra)
        return AttentionOutput(out, lse if return_lse else None)

    def prefill_many(self, q, k_cache, v_cache, tables, items, out, lse, *, scale, window=None, softcap=None,
                     meta=None):
        if not dispatch.use_triton(q.device):
            return super().prefill_many(q, k_cache, v_cache, tables, items, out, lse, scale=scale, window=window,
                                        softcap=softcap, meta=meta)
        dispatch.paged_prefill_varlen(q, k_cache, v_cache, tables, items, scale=scale, window=window, softcap=softcap,
                                      out=out, lse=lse, meta=meta)
        return None

    def decode(self, q, k_cache, v_cache, block_tables, kv_lens, *, scale, window=None, softcap=None, return_lse=False,
               warm: WarmPages | None = None):
        if not dispatch.use_triton(q.device):
            return self.fallback.decode(q, k_cache, v_cache, block_tables, kv_lens, scale=scale, window=window,
                                        softcap=softcap, return_lse=return_lse, warm=warm)
        extra = {}
        if warm is not None:
            extra = dict(k_cache_int8=warm.kq, v_cache_int8=warm.vq, k_scale=warm.ks, v_scale=warm.vs)
        out, lse = dispatch.paged_decode(q, k_cache, v_cache, block_tables, kv_lens, scale=scale, window=window,
                                         softcap=softcap, **extra)
        return AttentionOutput(out, lse if return_lse else None)


def sdpa_causal(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float) -> torch.Tensor:
    """Causal attention of q [Tq, H, D] over k, v [Tk, KVH, D], Tk >= Tq, through torch's
    scaled_dot_product_attention. The queries are the last Tq positions (query i sees keys
    0 .. Tk - Tq + i: the diagonal at the bottom right, torch's `causal_lower_right`), so Tk == Tq is
    a prompt's first chunk and Tk > Tq a chunk after a cached prefix. Grouped-query attention goes
    to the kernel as it is (`enable_gqa`) where torch takes it, else K/V heads are repeated (a
    transient copy of Tk x H x D each). Returns [Tq, H, D]."""
    tq, tk = q.shape[0], k.shape[0]
    h, kvh = q.shape[1], k.shape[1]
    qt = q.transpose(0, 1)[None]
    if tk == tq:
        mask, causal = None, True
    else:
        from torch.nn.attention.bias import causal_lower_right

        mask, causal = causal_lower_right(tq, tk), False
    try:
        out = F.scaled_dot_product_attention(qt, k.transpose(0, 1)[None], v.transpose(0, 1)[None], attn_mask=mask,
                                             is_causal=causal, scale=scale, enable_gqa=kvh != h)
    except RuntimeError:
        if kvh == h:
            raise
        k = k.repeat_interleave(h // kvh, dim=1)
        v = v.repeat_interleave(h // kvh, dim=1)
        out = F.scaled_dot_product_attention(qt, k.transpose(0, 1)[None], v.transpose(0, 1)[None], attn_mask=mask,
                                             is_causal=causal, scale=scale)
    return out[0].transpose(0, 1).contiguous()


# cuDNN builds an execution plan for every new (rows, keys) shape (~36 ms each on an H100, torch
# 2.11 / cuDNN 9.19) and, once per process, compiles a kernel for each of causal / unmasked x
# aligned / unaligned lengths (0.5-1.0 s each): BENCHMARKS.md, "Every length at full speed on the H100".
# So every call it gets has lengths that are multiples of CUDNN_ALIGN (`sdpa_cudnn`): two compiled
# kernels in all (which `LLM.warmup()` pays), and at most chunk / CUDNN_ALIGN shapes per prefix length.
# LONGDOC_CUDNN_ALIGN=0 passes the exact lengths (for measurement).
CUDNN_ALIGN = int(os.environ.get("LONGDOC_CUDNN_ALIGN", "128"))


def _cudnn_call(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool, scale: float
                ) -> tuple[torch.Tensor, torch.Tensor]:
    """cuDNN's fused attention of q [1, H, Tq, D] over k, v [1, H, Tk, D] (top-left causal or no
    mask): out [1, H, Tq, D] and the log-sum-exp [1, H, Tq] (float32)."""
    out, lse = torch.ops.aten._scaled_dot_product_cudnn_attention(q, k, v, None, True, 0.0, causal, False,
                                                                  scale=scale)[:2]
    return out, lse.reshape(out.shape[:-1])


def _rows(x: torch.Tensor, lead: int, total: int, heads: int) -> torch.Tensor:
    """x [T, kv_heads, D] as [1, heads, total, D] in one layout whatever x's strides (contiguous
    [total, heads, D] memory: cuDNN's plans depend on the strides, and q arrives as a slice of the
    fused q/k/v projection): `lead` zero rows, then x (each kv head repeated heads / kv_heads
    times), then zero rows. A view of x where x already is that."""
    t, kvh, d = x.shape
    if lead == 0 and total == t and kvh == heads and x.is_contiguous():
        return x.transpose(0, 1)[None]
    buf = x.new_zeros(total, heads, d) if (lead or total > t) else x.new_empty(total, heads, d)
    g = heads // kvh
    buf[lead:lead + t].view(t, kvh, g, d).copy_(x[:, :, None, :].expand(t, kvh, g, d))
    return buf.transpose(0, 1)[None]


def sdpa_cudnn(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float, align: int | None = None,
               call=None) -> torch.Tensor:
    """`sdpa_causal` through cuDNN's fused attention (what transformers' sdpa runs on Hopper), every
    call's lengths multiples of `align` (CUDNN_ALIGN; 0 or 1: exact lengths). torch offers cuDNN only
    the top-left causal mask, so a chunk of Tq rows after P keys of prefix is split at
    P0 = P rounded down to `align`: the queries over keys 0..P0-1 with no mask (queries padded with
    zero rows to a multiple), and a square causal call whose rows are the last P - P0 prefix keys'
    dummy queries, then the chunk, then padding: with the top-left mask, chunk row i sees the
    remaining prefix keys and its own keys up to i, exactly lower-right causal; padding rows come
    after every real one and are never seen. The two results are joined by their log-sum-exps
    (`merge_partial_attention`). `call(q, k, v, causal, scale) -> (out, lse)` stands in for cuDNN
    (tests). Raises RuntimeError where cuDNN does not take the case."""
    call = call or _cudnn_call
    a = max(1, align if align is not None else CUDNN_ALIGN)
    tq, tk, h = q.shape[0], k.shape[0], q.shape[1]
    p0 = (tk - tq) // a * a  # prefix keys attended with no mask
    lead = tk - tq - p0  # the rest of the prefix: the causal call's leading rows
    n = lead + tq
    na = -(-n // a) * a
    qc = _rows(q, lead, na, h)
    out, lse = call(qc, _rows(k[p0:], 0, na, h), _rows(v[p0:], 0, na, h), True, scale)
    out, lse = out[:, :, lead:n], lse[:, :, lead:n]
    if p0:
        qa = -(-tq // a) * a
        o1, l1 = call(qc[:, :, lead:lead + qa] if lead + qa <= na else _rows(q, 0, qa, h),
                      _rows(k[:p0], 0, p0, h), _rows(v[:p0], 0, p0, h), False, scale)
        out = merge_partial_attention(o1[:, :, :tq], l1[:, :, :tq], out, lse)
    return out[0].transpose(0, 1).contiguous()


def merge_partial_attention(o1: torch.Tensor, l1: torch.Tensor, o2: torch.Tensor, l2: torch.Tensor) -> torch.Tensor:
    """Attention over two disjoint key sets joined: o1, o2 [..., T, D] normalised over their own keys,
    l1, l2 [..., T] (or [..., T, 1]) their natural log-sum-exps of the scaled scores. Returns
    o = o1 * exp(l1 - l) + o2 * exp(l2 - l), l = log(exp(l1) + exp(l2)), in o1's dtype."""
    l1 = l1.reshape(o1.shape[:-1]).float()
    l2 = l2.reshape(o2.shape[:-1]).float()
    lse = torch.logaddexp(l1, l2)
    out = o1.float() * torch.exp(l1 - lse)[..., None] + o2.float() * torch.exp(l2 - lse)[..., None]
    return out.to(o1.dtype)


def contiguous_prefix(
    k_cache: torch.Tensor, v_cache: torch.Tensor, block_table: torch.Tensor, kv_len: int, warm: WarmPages | None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """One sequence's K and V at positions 0 .. kv_len-1 as contiguous [kv_len, kv_heads, head_dim]
    tensors in the pool's dtype (warm blocks dequantised): what a fused attention kernel that knows
    no block table reads. Costs one gather of the prefix per layer (at 128K tokens of the Llama-3-8B
    shape 256 MB each for K and V: well under a millisecond of an H200's bandwidth, against the
    chunk's attention of tens of milliseconds)."""
    bs = k_cache.shape[1]
    nb = (kv_len + bs - 1) // bs
    k, v = gather_blocks(k_cache, v_cache, block_table[:nb], warm)
    return k.reshape(nb * bs, *k.shape[2:])[:kv_len], v.reshape(nb * bs, *v.shape[2:])[:kv_len]


def _dequantised_view(
    k_cache: torch.Tensor, v_cache: torch.Tensor, block_table: torch.Tensor, q_offset: int, kv_len: int,
    window: int | None, warm: WarmPages,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """A temporary full-precision pool holding the blocks a prefill chunk can see (warm ones
    dequantised), and the block table that reads it: logical block b >= b0 (the first visible one)
    -> buffer block b - b0, blocks it cannot see -> -1."""
    bs = k_cache.shape[1]
    first = 0 if window is None else max(0, q_offset - window + 1)
    b0, b1 = first // bs, (kv_len + bs - 1) // bs
    seen = block_table[b0:b1]
    k, v = gather_blocks(k_cache, v_cache, seen, warm)  # buffer block i = logical block b0 + i
    table = torch.full((b1,), -1, dtype=block_table.dtype, device=block_table.device)
    table[b0:] = torch.where(seen != -1, torch.arange(b1 - b0, dtype=table.dtype, device=table.device), -1)
    return k, v, table


def default_backend(device: torch.device, weights: str = "float") -> AttentionBackend:
    """Triton on CUDA when it is installed, the torch reference elsewhere; with int8 weights on a
    CPU that multiplies bfloat16 natively, its prefill attention in bfloat16 as the matmuls are. On
    the CPU, chunks of fewer than GEMM_ROWS rows are computed row by row like decode steps."""
    if device.type == "cuda" and dispatch.triton_installed():
        return TritonAttentionBackend()
    if device.type == "cpu":
        from engine.model.quant import GEMM_ROWS, bf16_gemm

        # chunks of a few rows (speculative verification) computed as decode steps compute them
        if weights == "int8" and bf16_gemm():
            return TorchAttentionBackend(sdpa_dtype=torch.bfloat16, few_rows=GEMM_ROWS)
        return TorchAttentionBackend(few_rows=GEMM_ROWS)
    return TorchAttentionBackend()
