"""RoPE fused with the KV-cache write, in Triton.

For each new token: rotate its query heads and key heads by the token's cos/sin (half-split
"rotate_half" convention of the HF models), write the rotated key and the value into the cache
slot `slot = block * block_size + offset`, and return the rotated queries. One launch instead of
rotate-q, rotate-k, and two scatter copies. cos/sin come from the engine's RoPE module, so every
scaling type (linear, dynamic NTK, YaRN, llama3) and per-layer base is supported as is.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def _rope_kv_kernel(Q, K, V, COS, SIN, KC, VC, SLOTS, QO, KO,
                    stride_qt, stride_qh, stride_kt, stride_kh, stride_vt, stride_vh, stride_ct,
                    stride_cb, stride_cs, stride_ch, stride_ot, stride_oh, stride_kot, stride_koh,
                    H: tl.constexpr, KVH: tl.constexpr, HALF: tl.constexpr, BLOCK_H: tl.constexpr, BS: tl.constexpr,
                    WRITE_K: tl.constexpr):
    """Program (t, j): j < H rotates query head j of token t; j >= H rotates key head j - H and
    writes it and the value head into the token's cache slot (and, WRITE_K, the rotated key into
    KO: what a prefill's attention over its fresh keys reads)."""
    t = tl.program_id(0).to(tl.int64)
    j = tl.program_id(1)
    dims = tl.arange(0, BLOCK_H)
    d_ok = dims < HALF
    c = tl.load(COS + t * stride_ct + dims, mask=d_ok, other=0.0).to(tl.float32)
    s = tl.load(SIN + t * stride_ct + dims, mask=d_ok, other=0.0).to(tl.float32)
    if j < H:
        x1 = tl.load(Q + t * stride_qt + j * stride_qh + dims, mask=d_ok, other=0.0).to(tl.float32)
        x2 = tl.load(Q + t * stride_qt + j * stride_qh + HALF + dims, mask=d_ok, other=0.0).to(tl.float32)
        tl.store(QO + t * stride_ot + j * stride_oh + dims, (x1 * c - x2 * s).to(QO.dtype.element_ty), mask=d_ok)
        tl.store(QO + t * stride_ot + j * stride_oh + HALF + dims, (x2 * c + x1 * s).to(QO.dtype.element_ty), mask=d_ok)
    else:
        h = j - H
        slot = tl.load(SLOTS + t)
        base = (slot // BS) * stride_cb + (slot % BS) * stride_cs + h * stride_ch
        x1 = tl.load(K + t * stride_kt + h * stride_kh + dims, mask=d_ok, other=0.0).to(tl.float32)
        x2 = tl.load(K + t * stride_kt + h * stride_kh + HALF + dims, mask=d_ok, other=0.0).to(tl.float32)
        r1, r2 = x1 * c - x2 * s, x2 * c + x1 * s
        tl.store(KC + base + dims, r1.to(KC.dtype.element_ty), mask=d_ok)
        tl.store(KC + base + HALF + dims, r2.to(KC.dtype.element_ty), mask=d_ok)
        if WRITE_K:
            tl.store(KO + t * stride_kot + h * stride_koh + dims, r1.to(KO.dtype.element_ty), mask=d_ok)
            tl.store(KO + t * stride_kot + h * stride_koh + HALF + dims, r2.to(KO.dtype.element_ty), mask=d_ok)
        v1 = tl.load(V + t * stride_vt + h * stride_vh + dims, mask=d_ok, other=0.0)
        v2 = tl.load(V + t * stride_vt + h * stride_vh + HALF + dims, mask=d_ok, other=0.0)
        tl.store(VC + base + dims, v1.to(VC.dtype.element_ty), mask=d_ok)
        tl.store(VC + base + HALF + dims, v2.to(VC.dtype.element_ty), mask=d_ok)


def rope_and_cache_write(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
    k_cache: torch.Tensor, v_cache: torch.Tensor, slots: torch.Tensor, return_k: bool = False,
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """q [T, H, D], k/v [T, KVH, D], cos/sin [T, D] (rotate-half: both halves equal; the first is
    read) or [T, D/2], caches [N, bs, KVH, D] (same layout), slots [T].
    Returns rotated q (and, return_k, rotated k in k's dtype); writes rotated k and v into the caches."""
    t, h, d = q.shape
    kvh = k.shape[1]
    assert k_cache.stride() == v_cache.stride() and d % 2 == 0
    assert q.stride(-1) == 1 and k.stride(-1) == 1 and v.stride(-1) == 1
    qo = torch.empty_like(q)
    ko = torch.empty(k.shape, dtype=k.dtype, device=k.device) if return_k else qo
    if t:
        if cos.stride(-1) != 1:
            cos, sin = cos.contiguous(), sin.contiguous()
        _rope_kv_kernel[(t, h + kvh)](
            q, k, v, cos, sin, k_cache, v_cache, slots if slots.dtype == torch.int64 else slots.long(), qo, ko,
            q.stride(0), q.stride(1), k.stride(0), k.stride(1), v.stride(0), v.stride(1), cos.stride(0),
            k_cache.stride(0), k_cache.stride(1), k_cache.stride(2), qo.stride(0), qo.stride(1),
            ko.stride(0), ko.stride(1),
            H=h, KVH=kvh, HALF=d // 2, BLOCK_H=triton.next_power_of_2(d // 2), BS=k_cache.shape[1],
            WRITE_K=return_k, num_warps=1 if d <= 256 else 2,
        )
    return (qo, ko) if return_k else qo
