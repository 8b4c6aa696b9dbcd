"""INT8 block-wise quantisation of KV blocks, in Triton.

Each (block, kv head) of a `[N, block_size, kv_heads, head_dim]` pool gets one float32 scale,
absmax / 127 over the block's positions and dimensions, and values round(x / scale) in [-127, 127].
Error bound: every element is within scale / 2 = absmax / 254 of its original value (round to
nearest), i.e. relative to the block-head's largest magnitude at most 0.39%. Blocks that are all
zero get scale 1 and stay exact. The decode kernel reads these blocks directly.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def _quant_kernel(X, Q, S, stride_xb, stride_xs, stride_xh, stride_sb,
                  BS: tl.constexpr, D: tl.constexpr, BLOCK_S: tl.constexpr, BLOCK_D: tl.constexpr):
    blk = tl.program_id(0).to(tl.int64)  # blk * stride passes 2**31 in a large pool
    head = tl.program_id(1)
    rows = tl.arange(0, BLOCK_S)
    dims = tl.arange(0, BLOCK_D)
    ok = (rows[:, None] < BS) & (dims[None, :] < D)
    offs = blk * stride_xb + rows[:, None] * stride_xs + head * stride_xh + dims[None, :]
    x = tl.load(X + offs, mask=ok, other=0.0).to(tl.float32)
    amax = tl.max(tl.max(tl.abs(x), axis=1), axis=0)
    scale = tl.where(amax > 0, amax / 127.0, 1.0)
    y = x / scale
    y = tl.where(y >= 0, tl.floor(y + 0.5), -tl.floor(-y + 0.5))  # round half away from zero
    y = tl.minimum(tl.maximum(y, -127.0), 127.0)
    tl.store(Q + offs, y.to(tl.int8), mask=ok)
    tl.store(S + blk * stride_sb + head, scale)


@triton.jit
def _dequant_kernel(Q, S, X, stride_xb, stride_xs, stride_xh, stride_sb,
                    BS: tl.constexpr, D: tl.constexpr, BLOCK_S: tl.constexpr, BLOCK_D: tl.constexpr):
    blk = tl.program_id(0).to(tl.int64)  # blk * stride passes 2**31 in a large pool
    head = tl.program_id(1)
    rows = tl.arange(0, BLOCK_S)
    dims = tl.arange(0, BLOCK_D)
    ok = (rows[:, None] < BS) & (dims[None, :] < D)
    offs = blk * stride_xb + rows[:, None] * stride_xs + head * stride_xh + dims[None, :]
    q = tl.load(Q + offs, mask=ok, other=0).to(tl.float32)
    scale = tl.load(S + blk * stride_sb + head)
    tl.store(X + offs, (q * scale).to(X.dtype.element_ty), mask=ok)


def quantize_blocks(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """x [N, block_size, KVH, D] (any float dtype, contiguous) -> (int8 values, float32 scales [N, KVH])."""
    x = x.contiguous()
    n, bs, kvh, d = x.shape
    q = torch.empty(x.shape, dtype=torch.int8, device=x.device)
    s = torch.empty((n, kvh), dtype=torch.float32, device=x.device)
    if n:
        _quant_kernel[(n, kvh)](x, q, s, x.stride(0), x.stride(1), x.stride(2), s.stride(0),
                                BS=bs, D=d, BLOCK_S=triton.next_power_of_2(bs), BLOCK_D=triton.next_power_of_2(d))
    return q, s


def dequantize_blocks(q: torch.Tensor, scale: torch.Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    q = q.contiguous()
    n, bs, kvh, d = q.shape
    x = torch.empty(q.shape, dtype=dtype, device=q.device)
    if n:
        _dequant_kernel[(n, kvh)](q, scale.contiguous(), x, q.stride(0), q.stride(1), q.stride(2), scale.stride(0),
                                  BS=bs, D=d, BLOCK_S=triton.next_power_of_2(bs), BLOCK_D=triton.next_power_of_2(d))
    return x


@triton.jit
def _gather_tiered_kernel(BLOCKS, K, V, KQ, VQ, KS, VS, KO, VO,
                          stride_kb, stride_ks, stride_kh, stride_qb, stride_qs, stride_qh, stride_sb,
                          stride_ob, stride_os, stride_oh,
                          BS: tl.constexpr, D: tl.constexpr, BLOCK_S: tl.constexpr, BLOCK_D: tl.constexpr):
    i = tl.program_id(0)
    head = tl.program_id(1)
    rows = tl.arange(0, BLOCK_S)
    dims = tl.arange(0, BLOCK_D)
    ok = (rows[:, None] < BS) & (dims[None, :] < D)
    entry = tl.load(BLOCKS + i).to(tl.int64)  # ids in int64: id x block stride passes 2**31 in a large pool
    is_warm = entry <= -2
    hot = tl.maximum(entry, 0)  # -1 (a released entry) reads hot block 0: the caller masks it
    w = tl.maximum(-entry - 2, 0)
    out = i.to(tl.int64) * stride_ob + rows[:, None] * stride_os + head * stride_oh + dims[None, :]
    h_off = hot * stride_kb + rows[:, None] * stride_ks + head * stride_kh + dims[None, :]
    q_off = w * stride_qb + rows[:, None] * stride_qs + head * stride_qh + dims[None, :]
    dt = KO.dtype.element_ty
    if is_warm:
        ks = tl.load(KS + w * stride_sb + head)
        vs = tl.load(VS + w * stride_sb + head)
        tl.store(KO + out, (tl.load(KQ + q_off, mask=ok, other=0).to(tl.float32) * ks).to(dt), mask=ok)
        tl.store(VO + out, (tl.load(VQ + q_off, mask=ok, other=0).to(tl.float32) * vs).to(dt), mask=ok)
    else:
        tl.store(KO + out, tl.load(K + h_off, mask=ok, other=0.0), mask=ok)
        tl.store(VO + out, tl.load(V + h_off, mask=ok, other=0.0), mask=ok)


def gather_blocks_tiered(k_cache: torch.Tensor, v_cache: torch.Tensor, blocks: torch.Tensor, kq: torch.Tensor,
                         vq: torch.Tensor, ks: torch.Tensor, vs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """K and V of the table entries `blocks` [n] as [n, block_size, kv_heads, head_dim] in the pools'
    dtype, in one launch: a hot entry copied from k/v_cache, a warm one (<= -2, warm block -e - 2)
    dequantised from kq/vq with its scales ks/vs [N, KVH], -1 read as hot block 0. Each program
    reads only the tier its entry names, and nothing waits for the device (the engine's
    `gather_blocks` on CUDA; `reference.gather_blocks_tiered` is the torch form)."""
    n = blocks.shape[0]
    _, bs, kvh, d = k_cache.shape
    ko = torch.empty((n, bs, kvh, d), dtype=k_cache.dtype, device=k_cache.device)
    vo = torch.empty_like(ko)
    if n:
        assert k_cache.stride() == v_cache.stride() and kq.stride() == vq.stride() and ks.stride() == vs.stride()
        assert k_cache.stride(3) == 1 and kq.stride(3) == 1
        _gather_tiered_kernel[(n, kvh)](
            blocks.contiguous(), k_cache, v_cache, kq, vq, ks, vs, ko, vo,
            k_cache.stride(0), k_cache.stride(1), k_cache.stride(2), kq.stride(0), kq.stride(1), kq.stride(2),
            ks.stride(0), ko.stride(0), ko.stride(1), ko.stride(2),
            BS=bs, D=d, BLOCK_S=triton.next_power_of_2(bs), BLOCK_D=triton.next_power_of_2(d))
    return ko, vo
