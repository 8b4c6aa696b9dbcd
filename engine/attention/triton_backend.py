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
    whole prompt prefilled in one chunk) run through torch's fused SDPA (cuDNN or flash) over the
    chunk's own K/V instead of the paged Triton kernel: on an H200 those reach ~570 TFLOP/s on
    causal attention where our paged kernel reaches ~420-450 (BENCHMARKS.md, "Kernels (H200)"). Sliding-window
    layers, soft-capping, chunks after a cached prefix and attribution keep the Triton kernels
    (which skip what a window cannot see and return the log-sum-exp)."""

    name = "triton"
    SDPA_MIN_TOKENS = 256  # below this a chunk's attention costs next to nothing either way

    def __init__(self, sdpa_prefill: bool = True, prefill_reads_int8: bool | None = None) -> None:
        self.fallback = TorchAttentionBackend()
        self.sdpa_prefill = sdpa_prefill
        if prefill_reads_int8 is None:  # LONGDOC_PREFILL_READS_INT8=0/1
            prefill_reads_int8 = os.environ.get("LONGDOC_PREFILL_READS_INT8", "0") == "1"
        self.prefill_reads_int8 = prefill_reads_int8  # False (default): dequantise the visible blocks into a buffer
        self._sdpa_failed: set[tuple] = set()  # (head_dim, dtype) torch had no fused kernel for

    def prefill_fresh(self, q, k, v, *, scale, window=None, softcap=None):
        if (not self.sdpa_prefill or q.device.type != "cuda" or window is not None or softcap is not None
                or q.shape[0] < self.SDPA_MIN_TOKENS or q.dtype not in (torch.bfloat16, torch.float16)):
            return None
        key = (q.shape[-1], q.dtype)
        if key in self._sdpa_failed:
            return None
        from torch.nn.attention import SDPBackend, sdpa_kernel

        # fused kernels only: never the math path, which would materialise T x T scores; and not
        # cuDNN's, which builds a plan on the host for every new sequence length (on the H200: 1.4 s
        # of a 1.5 s 8K request, 5.4 s for an 8,292-token one; BENCHMARKS.md "First request after
        # warmup"): every user prompt has a new length
        try:
            with sdpa_kernel([SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION]):
                return sdpa_causal(q, k, v, scale)
        except RuntimeError:
            self._sdpa_failed.add(key)
            return None

    def prefill(self, q, k_cache, v_cache, block_table, *, q_offset, kv_len, scale, window=None, softcap=None,
                return_lse=False, warm: WarmPages | None = None):
        if not dispatch.use_triton(q.device):
            return self.fallback.prefill(q, k_cache, v_cache, block_table, q_offset=q_offset, kv_len=kv_len, scale=scale,
                                         window=window, softcap=softcap, return_lse=return_lse, warm=warm)
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
    """Causal attention of q [T, H, D] over k, v [T, KVH, D] (positions 0..T-1) through
    torch's scaled_dot_product_attention; K/V heads are repeated for grouped-query attention (a
    transient copy of T x H x D each, small next to the attention itself). Returns [T, H, D]."""
    h, kvh = q.shape[1], k.shape[1]
    if kvh != h:
        k = k.repeat_interleave(h // kvh, dim=1)
        v = v.repeat_interleave(h // kvh, dim=1)
    out = F.scaled_dot_product_attention(q.transpose(0, 1)[None], k.transpose(0, 1)[None], v.transpose(0, 1)[None],
                                         is_causal=True, scale=scale)
    return out[0].transpose(0, 1).contiguous()


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
