"""Attention mass per key position for attribution, in Triton, without the attention matrix.

Given the query rows of an answer (q [T, H, D] at positions qpos), their log-sum-exp from the
forward pass (lse [T, H], natural log), and one sequence's paged K cache, one program per
(key tile, head) loops over the query rows in tiles and accumulates
    mass[h, j] = sum_t exp(scale * q[t, h] . k[j] - lse[t, h])      (causal / window masked)
i.e. the probability each answer token's head h put on key j, summed over the answer. The result
is [H, kv_len] float32: O(H * L) memory, never O(T * L). Spans are then summed from it by the
caller (a prefix sum), so any number of spans costs nothing extra. Blocks may be hot or INT8 warm.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def _mass_kernel(Q, LSE, QPOS, K, KQ, KS, TABLE, MASS,
                 n_rows, kv_len, scale, window,
                 stride_qt, stride_qh, stride_lt, stride_kb, stride_ks, stride_kh,
                 stride_qkb, stride_qks, stride_qkh, stride_sb, stride_mh,
                 GROUP: tl.constexpr, BS: tl.constexpr, D: tl.constexpr, BLOCK_D: tl.constexpr,
                 BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, HAS_WINDOW: tl.constexpr, HAS_INT8: tl.constexpr,
                 SOFTCAP: tl.constexpr, HAS_SOFTCAP: tl.constexpr):
    pid_n = tl.program_id(0)
    head = tl.program_id(1)
    kvh = head // GROUP
    kpos = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    k_ok = kpos < kv_len
    dims = tl.arange(0, BLOCK_D)
    d_ok = dims < D
    entry = tl.load(TABLE + kpos // BS, mask=k_ok, other=-1)
    slot = kpos % BS
    hot = k_ok & (entry >= 0)
    k = tl.load(K + entry[:, None] * stride_kb + slot[:, None] * stride_ks + kvh * stride_kh + dims[None, :],
                mask=hot[:, None] & d_ok[None, :], other=0.0).to(tl.float32)
    valid = hot
    if HAS_INT8:
        warm = k_ok & (entry <= -2)
        widx = tl.where(warm, -entry - 2, 0)
        ks = tl.load(KS + widx * stride_sb + kvh, mask=warm, other=0.0)
        kq = tl.load(KQ + widx[:, None] * stride_qkb + slot[:, None] * stride_qks + kvh * stride_qkh + dims[None, :],
                     mask=warm[:, None] & d_ok[None, :], other=0).to(tl.float32)
        k = tl.where(warm[:, None], kq * ks[:, None], k)
        valid = hot | warm
    mass = tl.zeros([BLOCK_N], tl.float32)
    for start in range(0, n_rows, BLOCK_M):
        rows = start + tl.arange(0, BLOCK_M)
        r_ok = rows < n_rows
        q = tl.load(Q + rows[:, None] * stride_qt + head * stride_qh + dims[None, :],
                    mask=r_ok[:, None] & d_ok[None, :], other=0.0).to(tl.float32)
        lse = tl.load(LSE + rows * stride_lt + head, mask=r_ok, other=0.0)
        qpos = tl.load(QPOS + rows, mask=r_ok, other=-1)
        s = tl.dot(q, tl.trans(k)) * scale
        if HAS_SOFTCAP:
            x = s / SOFTCAP
            s = SOFTCAP * (2.0 / (1.0 + tl.exp(-2.0 * x)) - 1.0)
        allowed = r_ok[:, None] & valid[None, :] & (kpos[None, :] <= qpos[:, None])
        if HAS_WINDOW:
            allowed = allowed & (kpos[None, :] > qpos[:, None] - window)
        p = tl.where(allowed, tl.exp(s - lse[:, None]), 0.0)
        mass += tl.sum(p, axis=0)
    tl.store(MASS + head * stride_mh + kpos, mass, mask=k_ok)


def attention_mass(
    q: torch.Tensor, lse: torch.Tensor, qpos: torch.Tensor, k_cache: torch.Tensor, block_table: torch.Tensor,
    kv_len: int, *, scale: float, window: int | None = None, softcap: float | None = None,
    k_cache_int8: torch.Tensor | None = None, k_scale: torch.Tensor | None = None,
) -> torch.Tensor:
    """Mass [H, kv_len] float32 that the rows q [T, H, D] (positions qpos [T], log-sum-exp lse [T, H])
    put on each key position of one sequence's cache."""
    t, h, d = q.shape
    kvh = k_cache.shape[2]
    bs = k_cache.shape[1]
    mass = torch.empty((h, kv_len), dtype=torch.float32, device=q.device)
    if kv_len == 0:
        return mass
    has_int8 = k_cache_int8 is not None
    kq = k_cache_int8 if has_int8 else k_cache
    ks = k_scale if has_int8 else mass
    block_d = triton.next_power_of_2(d)
    block_n = 32 if block_d > 128 else 64
    lse = lse.float().contiguous()
    q = q.contiguous()
    _mass_kernel[(triton.cdiv(kv_len, block_n), h)](
        q, lse, qpos.to(torch.int32).contiguous(), k_cache, kq, ks, block_table.to(torch.int32).contiguous(), mass,
        t, kv_len, scale, window or 0,
        q.stride(0), q.stride(1), lse.stride(0), k_cache.stride(0), k_cache.stride(1), k_cache.stride(2),
        kq.stride(0), kq.stride(1), kq.stride(2), ks.stride(0), mass.stride(0),
        GROUP=h // kvh, BS=bs, D=d, BLOCK_D=block_d, BLOCK_M=16, BLOCK_N=block_n,
        HAS_WINDOW=window is not None, HAS_INT8=has_int8,
        SOFTCAP=float(softcap or 0.0), HAS_SOFTCAP=softcap is not None,
    )
    return mass
