"""Flash-style attention over the paged KV cache, in Triton: prefill and split-context decode.

Both kernels gather K/V rows through the block table (position p lives in logical block
p // block_size), keep a running max and sum (online softmax, never the full score matrix), mask
causally and by sliding window, and return the log-sum-exp of every query row in natural-log
units, which attribution reuses.

Prefill: one program per (query tile, head); the key loop starts at the first tile the window can
see and stops at the tile holding the tile's last query position, so sliding-window layers cost
O(T * window), not O(T^2).

Decode (flash-decoding): one program per (sequence, kv head, context split); the query heads of
the group are the rows of one tile (GQA without re-reading K/V). Each split writes its partial
output and log-sum-exp, and a second small kernel merges the splits. Blocks may be full precision
(hot pool) or INT8 with a per-(block, head) scale (warm pool), told apart by the block table entry
(see longdoc_kernels/__init__.py); INT8 values are dequantised in registers and all accumulation
is in float32, so the warm tier costs no extra pass and no accuracy beyond its rounding.

Under TRITON_INTERPRET=1 (the CPU tests) every tile is cast to float32 first, because the
interpreter's bf16 arithmetic is wrong; on a GPU the dots take bf16/fp16 operands and accumulate
in float32.
"""

from __future__ import annotations

import logging
import os

import torch
import triton
import triton.language as tl

from longdoc_kernels import tuning_cache


def _interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0") == "1"


@triton.jit
def _log2_scores(s, scale, SOFTCAP: tl.constexpr, HAS_SOFTCAP: tl.constexpr):
    """Raw q.k products -> scaled (and soft-capped) scores in log2 units, for exp2."""
    s = s * scale
    if HAS_SOFTCAP:
        # tanh(x) = 2 * sigmoid(2x) - 1, written with exp for portability across Triton versions
        x = s / SOFTCAP
        s = SOFTCAP * (2.0 / (1.0 + tl.exp(-2.0 * x)) - 1.0)
    return s * 1.4426950408889634


@triton.jit
def _prefill_tile(
    acc, m_i, l_i, q, qpos, start, kv_len, window, K, V, TABLE,
    stride_kb, stride_ks, stride_kh, stride_vb, stride_vs, stride_vh, kvh, dims, dim_ok, scale,
    KQ, VQ, KS, VS, stride_qkb, stride_qks, stride_qkh, stride_sb,
    BS: tl.constexpr, BLOCK_N: tl.constexpr, MASKED: tl.constexpr, HAS_WINDOW: tl.constexpr,
    SOFTCAP: tl.constexpr, HAS_SOFTCAP: tl.constexpr, UPCAST: tl.constexpr, HAS_INT8: tl.constexpr,
):
    """One key tile of the online softmax (scores in log2 units). HAS_INT8: table entries <= -2
    are INT8 warm blocks -(e + 2) of KQ/VQ with a scale per (block, kv head) in KS/VS, read as they
    are (the decode kernel's MODE 2): the scale factors out of both dots, s = (q . kq) * ks and
    p @ (vq * vs) = (p * vs) @ vq. Each kind's loads and dots run under a branch taken only when
    the tile holds a key of that kind (a tile of the warm middle of a context runs one pair of
    dots, not two: a 1,024-row chunk at 32K, Gemma's shape on the H100, 1.44 -> 1.12 ms; the
    float16 bit trick of the decode kernel's CONV 1 measured 2.3 ms there, not kept)."""
    kpos = start + tl.arange(0, BLOCK_N)
    blk = tl.load(TABLE + kpos // BS, mask=kpos < kv_len, other=-1)
    hot = (kpos < kv_len) & (blk >= 0)
    col_ok = hot
    slot = kpos % BS
    blk64 = blk.to(tl.int64)  # block id x block stride passes 2**31 in a large pool
    k_off = blk64[:, None] * stride_kb + slot[:, None] * stride_ks + kvh * stride_kh + dims[None, :]
    v_off = blk64[:, None] * stride_vb + slot[:, None] * stride_vs + kvh * stride_vh + dims[None, :]
    if HAS_INT8:
        warm = (kpos < kv_len) & (blk <= -2)
        widx = tl.where(warm, -blk - 2, 0).to(tl.int64)
        w_off = widx[:, None] * stride_qkb + slot[:, None] * stride_qks + kvh * stride_qkh + dims[None, :]
        n_warm = tl.sum(warm.to(tl.int32), axis=0)
        n_hot = tl.sum(hot.to(tl.int32), axis=0)
        raw = tl.zeros([q.shape[0], BLOCK_N], tl.float32)
        if n_hot > 0:
            k = tl.load(K + k_off, mask=hot[:, None] & dim_ok[None, :], other=0.0)
            if UPCAST:
                k = k.to(tl.float32)
            raw += tl.dot(q, tl.trans(k))
        if n_warm > 0:
            ks = tl.load(KS + widx * stride_sb + kvh, mask=warm, other=0.0)
            kq = tl.load(KQ + w_off, mask=warm[:, None] & dim_ok[None, :], other=0)
            raw += tl.dot(q, tl.trans(kq.to(q.dtype))) * ks[None, :]
        col_ok = col_ok | warm
    else:  # K and V loaded together before the dots, as this path always has (the pipeliner's order)
        k = tl.load(K + k_off, mask=hot[:, None] & dim_ok[None, :], other=0.0)
        v = tl.load(V + v_off, mask=hot[:, None] & dim_ok[None, :], other=0.0)
        if UPCAST:
            k = k.to(tl.float32)
            v = v.to(tl.float32)
        raw = tl.dot(q, tl.trans(k))
    s = _log2_scores(raw, scale, SOFTCAP, HAS_SOFTCAP)
    if MASKED:
        allowed = (kpos[None, :] <= qpos[:, None]) & col_ok[None, :]
        if HAS_WINDOW:
            allowed = allowed & (kpos[None, :] > qpos[:, None] - window)
        s = tl.where(allowed, s, float("-inf"))
    m_new = tl.maximum(m_i, tl.max(s, axis=1))
    m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
    alpha = tl.exp2(m_i - m_safe)
    p = tl.exp2(s - m_safe[:, None])
    l_i = l_i * alpha + tl.sum(p, axis=1)
    if HAS_INT8:
        acc = acc * alpha[:, None]
        if n_hot > 0:
            v = tl.load(V + v_off, mask=hot[:, None] & dim_ok[None, :], other=0.0)
            if UPCAST:
                v = v.to(tl.float32)
            acc += tl.dot(p.to(v.dtype), v)
        if n_warm > 0:
            vs = tl.load(VS + widx * stride_sb + kvh, mask=warm, other=0.0)
            vq = tl.load(VQ + w_off, mask=warm[:, None] & dim_ok[None, :], other=0)
            acc += tl.dot((p * vs[None, :]).to(q.dtype), vq.to(q.dtype))
    else:
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
    return acc, m_new, l_i


@triton.jit
def _prefill_program(
    Q, K, V, TABLE, OUT, LSE,
    q_offset, kv_len, n_rows, row0, head, split, scale, window, n_splits,
    stride_qt, stride_qh,
    stride_kb, stride_ks, stride_kh,
    stride_vb, stride_vs, stride_vh,
    stride_ot, stride_oh,
    stride_lt,
    stride_os, stride_ls,
    KQ, VQ, KS, VS, stride_qkb, stride_qks, stride_qkh, stride_sb,
    GROUP: tl.constexpr, BS: tl.constexpr, D: tl.constexpr, BLOCK_D: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
    HAS_WINDOW: tl.constexpr, SOFTCAP: tl.constexpr, HAS_SOFTCAP: tl.constexpr, UPCAST: tl.constexpr,
    HAS_INT8: tl.constexpr,
):
    """The query rows row0..row0+BLOCK_M-1 of one sequence's chunk (Q, OUT and LSE point at the
    chunk's first row; n_rows rows at positions q_offset..), one head, one key split. With n_splits > 1
    the key range the query tile sees is cut into n_splits runs of whole tiles, and the program
    writes its run's normalised output and log-sum-exp at OUT + split * stride_os /
    LSE + split * stride_ls for the caller to merge."""
    kvh = head // GROUP
    rows = row0 + tl.arange(0, BLOCK_M)
    row_ok = rows < n_rows
    qpos = q_offset + rows
    dims = tl.arange(0, BLOCK_D)
    dim_ok = dims < D
    q = tl.load(Q + rows[:, None] * stride_qt + head * stride_qh + dims[None, :], mask=row_ok[:, None] & dim_ok[None, :], other=0.0)
    if UPCAST:
        q = q.to(tl.float32)
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_D], tl.float32)
    first_q = q_offset + row0
    last_q = tl.minimum(q_offset + n_rows - 1, first_q + BLOCK_M - 1)
    hi = tl.minimum(last_q + 1, kv_len)
    # tiles wholly visible to every query of the tile need no mask: [full_lo, full_hi)
    full_hi = tl.minimum(((first_q + 1) // BLOCK_N) * BLOCK_N, hi)
    lo = 0
    full_lo = 0
    if HAS_WINDOW:
        lo = (tl.maximum(first_q - window + 1, 0) // BLOCK_N) * BLOCK_N
        full_lo = tl.minimum(tl.cdiv(tl.maximum(last_q - window + 1, 0), BLOCK_N) * BLOCK_N, full_hi)
    # this split's run of tiles [s_lo, s_hi) of the tiles [lo, hi) the query tile sees
    per = tl.cdiv(tl.cdiv(hi - lo, BLOCK_N), n_splits) * BLOCK_N
    s_lo = lo + split * per
    s_hi = tl.minimum(hi, s_lo + per)
    if HAS_WINDOW:
        for start in range(s_lo, tl.minimum(full_lo, s_hi), BLOCK_N):
            acc, m_i, l_i = _prefill_tile(
                acc, m_i, l_i, q, qpos, start, kv_len, window, K, V, TABLE,
                stride_kb, stride_ks, stride_kh, stride_vb, stride_vs, stride_vh, kvh, dims, dim_ok, scale,
                KQ, VQ, KS, VS, stride_qkb, stride_qks, stride_qkh, stride_sb,
                BS, BLOCK_N, True, HAS_WINDOW, SOFTCAP, HAS_SOFTCAP, UPCAST, HAS_INT8)
    for start in range(tl.maximum(full_lo, s_lo), tl.minimum(full_hi, s_hi), BLOCK_N):
        acc, m_i, l_i = _prefill_tile(
            acc, m_i, l_i, q, qpos, start, kv_len, window, K, V, TABLE,
            stride_kb, stride_ks, stride_kh, stride_vb, stride_vs, stride_vh, kvh, dims, dim_ok, scale,
            KQ, VQ, KS, VS, stride_qkb, stride_qks, stride_qkh, stride_sb,
            BS, BLOCK_N, False, HAS_WINDOW, SOFTCAP, HAS_SOFTCAP, UPCAST, HAS_INT8)
    for start in range(tl.maximum(tl.maximum(full_hi, full_lo), s_lo), s_hi, BLOCK_N):
        acc, m_i, l_i = _prefill_tile(
            acc, m_i, l_i, q, qpos, start, kv_len, window, K, V, TABLE,
            stride_kb, stride_ks, stride_kh, stride_vb, stride_vs, stride_vh, kvh, dims, dim_ok, scale,
            KQ, VQ, KS, VS, stride_qkb, stride_qks, stride_qkh, stride_sb,
            BS, BLOCK_N, True, HAS_WINDOW, SOFTCAP, HAS_SOFTCAP, UPCAST, HAS_INT8)
    l_safe = tl.where(l_i > 0, l_i, 1.0)
    out = acc / l_safe[:, None]
    tl.store(OUT + split * stride_os + rows[:, None] * stride_ot + head * stride_oh + dims[None, :],
             out.to(OUT.dtype.element_ty), mask=row_ok[:, None] & dim_ok[None, :])
    lse = (m_i + tl.log2(l_safe)) / 1.4426950408889634
    tl.store(LSE + split * stride_ls + rows * stride_lt + head, lse, mask=row_ok)


# Triton compiles a kernel per class of each integer argument (== 1, a multiple of 16, other): a
# prompt whose length or offset falls in a class no earlier one had paid a compile inside the
# user's request (~1 s on an H100: an 8,155-token prompt after 8,192-token ones, BENCHMARKS.md).
# The lengths, offsets and split counts are not specialised on (they bound loops and masks, no
# vector access depends on them); the split buffers are padded so that their strides stay
# multiples of 16.
_LENGTH_ARGS = ["q_offset", "kv_len", "n_rows", "window", "n_splits"]


@triton.jit(do_not_specialize=_LENGTH_ARGS)
def _prefill_kernel(
    Q, K, V, TABLE, OUT, LSE,
    q_offset, kv_len, n_rows, scale, window, n_splits,
    stride_qt, stride_qh,
    stride_kb, stride_ks, stride_kh,
    stride_vb, stride_vs, stride_vh,
    stride_ot, stride_oh,
    stride_lt,
    stride_os, stride_ls,
    KQ, VQ, KS, VS, stride_qkb, stride_qks, stride_qkh, stride_sb,
    GROUP: tl.constexpr, BS: tl.constexpr, D: tl.constexpr, BLOCK_D: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
    HAS_WINDOW: tl.constexpr, SOFTCAP: tl.constexpr, HAS_SOFTCAP: tl.constexpr, UPCAST: tl.constexpr,
    HAS_INT8: tl.constexpr,
):
    """One sequence's chunk: program (query tile, head, key split)."""
    _prefill_program(
        Q, K, V, TABLE, OUT, LSE,
        q_offset, kv_len, n_rows, tl.program_id(0) * BLOCK_M, tl.program_id(1), tl.program_id(2), scale, window,
        n_splits, stride_qt, stride_qh, stride_kb, stride_ks, stride_kh, stride_vb, stride_vs, stride_vh,
        stride_ot, stride_oh, stride_lt, stride_os, stride_ls,
        KQ, VQ, KS, VS, stride_qkb, stride_qks, stride_qkh, stride_sb,
        GROUP, BS, D, BLOCK_D, BLOCK_M, BLOCK_N, HAS_WINDOW, SOFTCAP, HAS_SOFTCAP, UPCAST, HAS_INT8)


@triton.jit(do_not_specialize=["window", "n_splits", "stride_tb"])
def _prefill_varlen_kernel(
    Q, K, V, TABLES, OUT, LSE, ITEMS, TILES,
    scale, window, n_splits,
    stride_tb,
    stride_qt, stride_qh,
    stride_kb, stride_ks, stride_kh,
    stride_vb, stride_vs, stride_vh,
    stride_ot, stride_oh,
    stride_lt,
    stride_os, stride_ls,
    GROUP: tl.constexpr, BS: tl.constexpr, D: tl.constexpr, BLOCK_D: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
    HAS_WINDOW: tl.constexpr, SOFTCAP: tl.constexpr, HAS_SOFTCAP: tl.constexpr, UPCAST: tl.constexpr,
):
    """Several sequences' chunks in one launch: program (tile, head, key split), where tile t is
    query tile TILES[t, 1] of chunk TILES[t, 0], and chunk i is ITEMS[i] = (first batch row,
    rows, q_offset) reading block table row i of TABLES."""
    t = tl.program_id(0)
    item = tl.load(TILES + 2 * t)
    row0 = tl.load(TILES + 2 * t + 1) * BLOCK_M
    start = tl.load(ITEMS + 3 * item).to(tl.int64)
    n_rows = tl.load(ITEMS + 3 * item + 1)
    q_offset = tl.load(ITEMS + 3 * item + 2)
    _prefill_program(
        Q + start * stride_qt, K, V, TABLES + item.to(tl.int64) * stride_tb,
        OUT + start * stride_ot, LSE + start * stride_lt,
        q_offset, q_offset + n_rows, n_rows, row0, tl.program_id(1), tl.program_id(2), scale, window,
        n_splits, stride_qt, stride_qh, stride_kb, stride_ks, stride_kh, stride_vb, stride_vs, stride_vh,
        stride_ot, stride_oh, stride_lt, stride_os, stride_ls,
        K, V, K, V, 0, 0, 0, 0,  # no INT8 pages in a varlen launch (the engine sends those chunks one by one)
        GROUP, BS, D, BLOCK_D, BLOCK_M, BLOCK_N, HAS_WINDOW, SOFTCAP, HAS_SOFTCAP, UPCAST, False)


def _split_parts(splits: int, rows: int, h: int, d: int, device) -> tuple[torch.Tensor, torch.Tensor]:
    """Float32 buffers for the key splits' partial outputs [splits, rows, h, d] and log-sum-exps
    [splits, rows, h], views of buffers whose rows are padded to a multiple of 16."""
    padded = -(-rows // 16) * 16
    out = torch.empty((splits, padded, h, d), dtype=torch.float32, device=device)[:, :rows]
    lse = torch.empty((splits, padded, h), dtype=torch.float32, device=device)[:, :rows]
    return out, lse


PREFILL_CONFIGS = {  # head_dim bucket -> (BLOCK_M, BLOCK_N, num_warps, num_stages); see BENCHMARKS.md
    64: (128, 64, 4, 3),
    128: (128, 64, 4, 3),
    256: (128, 64, 8, 3),
}


def paged_prefill(
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
    block_m: int | None = None,
    block_n: int | None = None,
    config: tuple[int, int, int, int] | None = None,
    n_splits: int | None = None,
    k_cache_int8: torch.Tensor | None = None,
    v_cache_int8: torch.Tensor | None = None,
    k_scale: torch.Tensor | None = None,
    v_scale: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """q [Tq, H, D] at positions q_offset.. over one sequence's cache (its own keys already
    written). Returns out [Tq, H, D] (q's dtype) and lse [Tq, H] float32. n_splits: key splits per
    query tile (None: `prefill_splits`, more than one only for a few query rows over a long
    context on a GPU, where one program per head would read the whole context alone).
    k/v_cache_int8 [N, BS, KVH, D] int8 and k/v_scale [N, KVH]: the warm tier's pages, which table
    entries e <= -2 point at (page -(e + 2)), read directly as the decode kernel reads them."""
    tq, h, d = q.shape
    kvh = k_cache.shape[2]
    bs = k_cache.shape[1]
    out = torch.empty_like(q)
    lse = torch.empty((tq, h), dtype=torch.float32, device=q.device)
    if tq == 0:
        return out, lse
    block_d = triton.next_power_of_2(d)
    interp = _interpreting()
    cfg_m, cfg_n, warps, stages = PREFILL_CONFIGS[min(max(block_d, 64), 256)]
    if config is not None:
        cfg_m, cfg_n, warps, stages = config
    # a few query rows: a query tile no taller than they need (tl.dot takes 16 rows at least)
    bm = block_m or (16 if interp else min(cfg_m, max(16, triton.next_power_of_2(tq))))
    bn = block_n or (16 if interp else cfg_n)
    q = q.contiguous()
    table = block_table.to(torch.int32).contiguous()
    q_tiles = triton.cdiv(tq, bm)
    seen = min(kv_len, (window or kv_len) + tq)  # keys one query tile may read, at most
    splits = n_splits if n_splits is not None else prefill_splits(q_tiles * h, seen, bn, q.device)
    parts_out, parts_lse = out, lse
    if splits > 1:  # rows padded to a multiple of 16: the split strides keep one specialisation
        parts_out, parts_lse = _split_parts(splits, tq, h, d, q.device)
    grid = (q_tiles, h, splits)
    has_int8 = k_cache_int8 is not None
    if has_int8:
        if v_cache_int8 is None or k_scale is None or v_scale is None or k_cache_int8.stride() != v_cache_int8.stride():
            raise ValueError("INT8 pages need k/v_cache_int8 with the same strides and k/v_scale")
        kq, vq, ks, vs = k_cache_int8, v_cache_int8, k_scale.contiguous(), v_scale.contiguous()
        qstrides = (kq.stride(0), kq.stride(1), kq.stride(2), ks.stride(0))
        # 3 pipeline stages of hot + int8 K/V tiles at head_dim 256 need 296 KB of shared memory,
        # over the H100/H200's 227 KB; 2 passed the GPU tests (H100, 2026-12-05; the illegal memory
        # access once seen with them was the decode kernel's, since fixed); 1, 2 and 3 measured the
        # same (bench_kernels.py --int8-prefill, H100, 2026-12-07: BENCHMARKS.md), so 1 stays
        stages = int(os.environ.get("LONGDOC_PREFILL_INT8_STAGES", "1"))
    else:
        kq, vq, ks, vs = k_cache, v_cache, k_cache, v_cache  # unused (HAS_INT8 False)
        qstrides = (0, 0, 0, 0)
    _prefill_kernel[grid](
        q, k_cache, v_cache, table, parts_out, parts_lse,
        q_offset, kv_len, tq, scale, window or 0, splits,
        q.stride(0), q.stride(1),
        k_cache.stride(0), k_cache.stride(1), k_cache.stride(2),
        v_cache.stride(0), v_cache.stride(1), v_cache.stride(2),
        parts_out.stride(-3), parts_out.stride(-2),
        parts_lse.stride(-2),
        parts_out.stride(0) if splits > 1 else 0, parts_lse.stride(0) if splits > 1 else 0,
        kq, vq, ks, vs, *qstrides,
        GROUP=h // kvh, BS=bs, D=d, BLOCK_D=block_d, BLOCK_M=bm, BLOCK_N=bn,
        HAS_WINDOW=window is not None, SOFTCAP=float(softcap or 0.0), HAS_SOFTCAP=softcap is not None,
        UPCAST=interp or q.dtype == torch.float32, HAS_INT8=has_int8,
        num_warps=warps, num_stages=stages,
    )
    if splits > 1:  # merge the runs: weights exp(lse_s - lse); an empty run has lse -inf, weight 0
        lse = torch.logsumexp(parts_lse, dim=0)
        w = torch.exp(parts_lse - lse[None]).nan_to_num_(0.0)
        out = (parts_out * w[..., None]).sum(0).to(q.dtype)
    return out, lse


def paged_prefill_varlen(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    tables: torch.Tensor,
    items: list[tuple[int, int, int]],
    *,
    scale: float,
    window: int | None = None,
    softcap: float | None = None,
    out: torch.Tensor | None = None,
    lse: torch.Tensor | None = None,
    n_splits: int | None = None,
    meta: dict | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Several sequences' prefill chunks in one launch. q [T, H, D] holds the batch's rows; chunk i
    = items[i] = (first row, rows, q_offset) reads block table row i of tables [n, max_blocks]
    (-1 padded) and attends over its positions 0..q_offset+rows-1. Writes the chunks' rows of out
    [T, H, D] and lse [T, H] (allocated when None; other rows are left as they are) and returns
    both. `meta`: a dict kept by the caller across the layers of one forward, in which the
    launch's small index tensors are built once. n_splits as in `paged_prefill`."""
    t, h, d = q.shape
    kvh = k_cache.shape[2]
    bs = k_cache.shape[1]
    out = torch.empty_like(q) if out is None else out
    lse = torch.empty((t, h), dtype=torch.float32, device=q.device) if lse is None else lse
    if not any(n for _, n, _ in items):  # (an empty chunk has no tile, and keeps its table row)
        return out, lse
    block_d = triton.next_power_of_2(d)
    interp = _interpreting()
    cfg_m, cfg_n, warps, stages = PREFILL_CONFIGS[min(max(block_d, 64), 256)]
    # one BLOCK_M whatever the chunks' lengths: each value is a compile (~2.7 s on an H100), and a
    # user's first batch met one the warm-up had not (a global layer's short chunk tail: 2.7 s of
    # its 4.4 s to the last first token, BENCHMARKS.md "The first batch's compile"); a short
    # chunk's tile of masked rows costs next to nothing
    bm = 16 if interp else cfg_m
    bn = 16 if interp else cfg_n
    meta = {} if meta is None else meta
    if bm not in meta:
        tiles = [(i, j) for i, (_, n, _) in enumerate(items) for j in range(triton.cdiv(n, bm))]
        rows = [r for s0, n, _ in items for r in range(s0, s0 + n)]
        meta[bm] = (
            torch.tensor(items, dtype=torch.int32).to(q.device),
            torch.tensor(tiles, dtype=torch.int32).to(q.device),
            torch.tensor(rows, dtype=torch.long).to(q.device),
        )
    items_t, tiles_t, rows_t = meta[bm]
    q = q.contiguous()
    tables = tables.to(torch.int32).contiguous()
    seen = max(min(off + n, (window or off + n) + n) for _, n, off in items if n)
    splits = n_splits if n_splits is not None else prefill_splits(tiles_t.shape[0] * h, seen, bn, q.device)
    parts_out, parts_lse = out, lse
    if splits > 1:
        parts_out, parts_lse = _split_parts(splits, t, h, d, q.device)
    _prefill_varlen_kernel[(tiles_t.shape[0], h, splits)](
        q, k_cache, v_cache, tables, parts_out, parts_lse, items_t, tiles_t,
        scale, window or 0, splits,
        tables.stride(0),
        q.stride(0), q.stride(1),
        k_cache.stride(0), k_cache.stride(1), k_cache.stride(2),
        v_cache.stride(0), v_cache.stride(1), v_cache.stride(2),
        parts_out.stride(-3), parts_out.stride(-2),
        parts_lse.stride(-2),
        parts_out.stride(0) if splits > 1 else 0, parts_lse.stride(0) if splits > 1 else 0,
        GROUP=h // kvh, BS=bs, D=d, BLOCK_D=block_d, BLOCK_M=bm, BLOCK_N=bn,
        HAS_WINDOW=window is not None, SOFTCAP=float(softcap or 0.0), HAS_SOFTCAP=softcap is not None,
        UPCAST=interp or q.dtype == torch.float32,
        num_warps=warps, num_stages=stages,
    )
    if splits > 1:  # merge the runs of the chunks' rows (as in paged_prefill)
        p_lse = parts_lse[:, rows_t]
        m = torch.logsumexp(p_lse, dim=0)
        w = torch.exp(p_lse - m[None]).nan_to_num_(0.0)
        out[rows_t] = (parts_out[:, rows_t] * w[..., None]).sum(0).to(out.dtype)
        lse[rows_t] = m
    return out, lse


def prefill_splits(programs: int, keys: int, block_n: int, device: torch.device) -> int:
    """Key splits for a prefill launch of `programs` (query tile, head) programs over up to `keys`
    keys: enough programs to fill the GPU twice over, each run at least 8 tiles of keys; 1 when the
    launch fills the GPU already or the context is short (a fresh long chunk, the CPU)."""
    if device.type != "cuda":
        return 1
    sms = torch.cuda.get_device_properties(device).multi_processor_count
    if programs >= sms:
        return 1
    return max(1, min(-(-2 * sms // programs), keys // (8 * block_n), 64))


@triton.jit
def _i8_to_f16(x):
    """int8 -> float16, exactly, without the conversion unit: the bits 0x6400 | (x + 128) are the
    float16 1024 + (x + 128) (one binade, ulp 1), from which 1152 is subtracted. A few integer ops
    and one packed half subtract per pair, against the quarter-rate I2F of a plain cast."""
    u = x.to(tl.uint8, bitcast=True) ^ tl.full(x.shape, 128, tl.uint8)
    h = (u.to(tl.uint16) | tl.full(x.shape, 0x6400, tl.uint16)).to(tl.float16, bitcast=True)
    return h - tl.full(x.shape, 1152.0, tl.float16)


@triton.jit
def _i8_to_f16_probe(X, Y, N: tl.constexpr):
    """_i8_to_f16 over N values (for its test)."""
    offs = tl.arange(0, N)
    tl.store(Y + offs, _i8_to_f16(tl.load(X + offs)))


@triton.jit
def _decode_tiles(
    q, m_i, l_i, acc, K, V, KQ, VQ, KS, VS, TABLES, seq, kvh, lo, hi, kv_len, lo_pos,
    scale, max_blocks, stride_kb, stride_ks, stride_kh, stride_qkb, stride_qks, stride_qkh, stride_sb,
    dims, dim_ok, BS: tl.constexpr, BLOCK_N: tl.constexpr, MODE: tl.constexpr,
    SOFTCAP: tl.constexpr, HAS_SOFTCAP: tl.constexpr, CONV: tl.constexpr = 0,
):
    """Online softmax over the key positions [lo, hi) of one sequence and KV head. MODE 0: hot
    (full-precision) blocks only; 1: INT8 warm blocks only; 2: either, loaded under a uniform
    branch per tile; 3: either, both loaded under masks with no branch.

    INT8 pages: the scale is per (block, head), i.e. per key, so it factors out of both dots:
    s = (q . kq) * ks and p @ (vq * vs) = (p * vs) @ vq. The int8 values go to the dot as they
    are (exact in bf16/fp16); no per-element dequantisation.

    CONV (MODE 1 only) picks how the int8 values reach the tensor cores: 0 a cast to q's dtype;
    1 float16 through _i8_to_f16 (q pre-scaled by `scale` and taken to float16, p * vs in
    float16); 2 keys as int8 into an int8 x int8 -> int32 dot with q quantised per row to int8
    (values as CONV 1)."""
    sc = scale
    if MODE == 1 and CONV == 1:
        q = (q.to(tl.float32) * scale).to(tl.float16)
        sc = 1.0
    if MODE == 1 and CONV == 2:
        qf = q.to(tl.float32) * scale
        q_amax = tl.max(tl.abs(qf), axis=1)
        q_scale = tl.where(q_amax > 0, q_amax / 127.0, 1.0)
        q = tl.floor(qf / q_scale[:, None] + 0.5).to(tl.int8)
        sc = 1.0
    for start in range(lo, hi, BLOCK_N):
        kpos = start + tl.arange(0, BLOCK_N)
        in_range = (kpos < hi) & (kpos < kv_len) & (kpos >= lo_pos)
        entry = tl.load(TABLES + seq * max_blocks + kpos // BS, mask=(kpos < hi) & (kpos // BS < max_blocks), other=-1)
        slot = kpos % BS
        hot = in_range & (entry >= 0)
        warm = in_range & (entry <= -2)
        widx = tl.where(warm, -entry - 2, 0)
        # block ids in int64: id x block stride passes 2**31 in a large pool
        k_off = entry.to(tl.int64)[:, None] * stride_kb + slot[:, None] * stride_ks + kvh * stride_kh + dims[None, :]
        q_off = widx.to(tl.int64)[:, None] * stride_qkb + slot[:, None] * stride_qks + kvh * stride_qkh + dims[None, :]
        s = tl.zeros([q.shape[0], BLOCK_N], tl.float32)
        if MODE == 0:
            k = tl.load(K + k_off, mask=hot[:, None] & dim_ok[None, :], other=0.0)
            s += tl.dot(q, tl.trans(k.to(q.dtype)))  # fp32 accumulation
            valid = hot
        elif MODE == 1:
            ks = tl.load(KS + widx * stride_sb + kvh, mask=warm, other=0.0)
            kq = tl.load(KQ + q_off, mask=warm[:, None] & dim_ok[None, :], other=0)
            if CONV == 0:
                s += tl.dot(q, tl.trans(kq.to(q.dtype))) * ks[None, :]
            elif CONV == 1:
                s += tl.dot(q, tl.trans(_i8_to_f16(kq))) * ks[None, :]
            else:
                s += tl.dot(q, tl.trans(kq), out_dtype=tl.int32).to(tl.float32) * q_scale[:, None] * ks[None, :]
            valid = warm
        elif MODE == 2:
            n_hot = tl.sum(hot.to(tl.int32), axis=0)
            n_warm = tl.sum(warm.to(tl.int32), axis=0)
            if n_hot > 0:
                k = tl.load(K + k_off, mask=hot[:, None] & dim_ok[None, :], other=0.0)
                s += tl.dot(q, tl.trans(k.to(q.dtype)))
            if n_warm > 0:
                ks = tl.load(KS + widx * stride_sb + kvh, mask=warm, other=0.0)
                kq = tl.load(KQ + q_off, mask=warm[:, None] & dim_ok[None, :], other=0)
                s += tl.dot(q, tl.trans(kq.to(q.dtype))) * ks[None, :]
            valid = hot | warm
        else:
            k = tl.load(K + k_off, mask=hot[:, None] & dim_ok[None, :], other=0.0)
            ks = tl.load(KS + widx * stride_sb + kvh, mask=warm, other=0.0)
            kq = tl.load(KQ + q_off, mask=warm[:, None] & dim_ok[None, :], other=0)
            s += tl.dot(q, tl.trans(k.to(q.dtype)))
            s += tl.dot(q, tl.trans(kq.to(q.dtype))) * ks[None, :]
            valid = hot | warm
        s = _log2_scores(s, sc, SOFTCAP, HAS_SOFTCAP)
        s = tl.where(valid[None, :], s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
        alpha = tl.exp2(m_i - m_safe)
        p = tl.exp2(s - m_safe[:, None])
        l_i = l_i * alpha + tl.sum(p, axis=1)
        acc = acc * alpha[:, None]
        if MODE == 0:
            v = tl.load(V + k_off, mask=hot[:, None] & dim_ok[None, :], other=0.0)
            acc += tl.dot(p.to(q.dtype), v.to(q.dtype))
        elif MODE == 1:
            vs = tl.load(VS + widx * stride_sb + kvh, mask=warm, other=0.0)
            vq = tl.load(VQ + q_off, mask=warm[:, None] & dim_ok[None, :], other=0)
            if CONV == 0:
                acc += tl.dot((p * vs[None, :]).to(q.dtype), vq.to(q.dtype))
            else:
                acc += tl.dot((p * vs[None, :]).to(tl.float16), _i8_to_f16(vq))
        elif MODE == 2:
            if n_hot > 0:
                v = tl.load(V + k_off, mask=hot[:, None] & dim_ok[None, :], other=0.0)
                acc += tl.dot(p.to(q.dtype), v.to(q.dtype))  # non-hot rows of v load as 0
            if n_warm > 0:
                vs = tl.load(VS + widx * stride_sb + kvh, mask=warm, other=0.0)
                vq = tl.load(VQ + q_off, mask=warm[:, None] & dim_ok[None, :], other=0)
                acc += tl.dot((p * vs[None, :]).to(q.dtype), vq.to(q.dtype))
        else:
            v = tl.load(V + k_off, mask=hot[:, None] & dim_ok[None, :], other=0.0)
            vs = tl.load(VS + widx * stride_sb + kvh, mask=warm, other=0.0)
            vq = tl.load(VQ + q_off, mask=warm[:, None] & dim_ok[None, :], other=0)
            acc += tl.dot(p.to(q.dtype), v.to(q.dtype))
            acc += tl.dot((p * vs[None, :]).to(q.dtype), vq.to(q.dtype))
        m_i = m_new
    return m_i, l_i, acc


# as _LENGTH_ARGS: an eager decode step's table width and split size vary with its sequences'
# lengths (a mixed step's decode rows), and each new class of them would compile the kernel again
# inside a request; CUDA-graph captures see only the bucket widths
@triton.jit(do_not_specialize=["window", "max_blocks", "blocks_per_split"])
def _decode_split_kernel(
    Q, K, V, KQ, VQ, KS, VS, TABLES, LENS, OUT_PART, LSE_PART,
    scale, window, max_blocks, blocks_per_split,
    stride_qb, stride_qh,
    stride_kb, stride_ks, stride_kh,
    stride_qkb, stride_qks, stride_qkh,
    stride_sb,
    stride_ob, stride_oh, stride_os,
    stride_lb, stride_lh,
    GROUP: tl.constexpr, GROUP_PAD: tl.constexpr, BS: tl.constexpr, D: tl.constexpr, BLOCK_D: tl.constexpr,
    BLOCK_N: tl.constexpr, HAS_WINDOW: tl.constexpr, HAS_INT8: tl.constexpr,
    SOFTCAP: tl.constexpr, HAS_SOFTCAP: tl.constexpr, UPCAST: tl.constexpr, INT8_MODE: tl.constexpr,
    INT8_CONV: tl.constexpr, BLOCK_NW: tl.constexpr,
):
    """INT8_MODE (with INT8 pages): 2 / 3 run every tile as _decode_tiles' MODE 2 / 3; 4 (the
    default) first finds the span of each kind of block in this program's range (a read of its
    block-table entries), then runs the warm-only loop over the warm span, in tiles of BLOCK_NW
    keys, and the hot-only loop over the hot span (BLOCK_N keys), each masking the other kind: a
    loop with one kind of load is software-pipelined, a range usually holds one kind (the hot tier
    is the sinks and the recent window), and where it holds both the spans barely overlap. An INT8
    tile carries half a bf16 tile's bytes, so the warm loop wants the larger tile to keep as many
    bytes in flight (measured on the H200: BENCHMARKS.md)."""
    seq = tl.program_id(0)
    kvh = tl.program_id(1)
    split = tl.program_id(2)
    kv_len = tl.load(LENS + seq)
    qpos = kv_len - 1
    rows = tl.arange(0, GROUP_PAD)  # the group's query heads, padded to a tensor-core tile
    row_ok = rows < GROUP
    heads = kvh * GROUP + rows
    dims = tl.arange(0, BLOCK_D)
    dim_ok = dims < D
    q = tl.load(Q + seq * stride_qb + heads[:, None] * stride_qh + dims[None, :], mask=row_ok[:, None] & dim_ok[None, :], other=0.0)
    if UPCAST:
        q = q.to(tl.float32)
    lo_pos = 0
    if HAS_WINDOW:
        lo_pos = tl.maximum(qpos - window + 1, 0)
    first_blk = lo_pos // BS
    n_blk = tl.cdiv(kv_len, BS) - first_blk
    b_start = first_blk + split * blocks_per_split
    b_end = tl.minimum(b_start + blocks_per_split, first_blk + n_blk)
    # a split past the sequence's last block has nothing to do: an empty range, not an inverted
    # one (mode 4's spans start inverted, so [b_end, b_start) would pass `hi > lo` and its table
    # reads would run past the row, off the end of the tables tensor for the last sequence: the
    # illegal memory access of the warm-tier graph test, which appeared with the layout of the
    # allocator's segments)
    b_start = tl.minimum(b_start, b_end)
    m_i = tl.full([GROUP_PAD], float("-inf"), tl.float32)
    l_i = tl.zeros([GROUP_PAD], tl.float32)
    acc = tl.zeros([GROUP_PAD, BLOCK_D], tl.float32)
    lo, hi = b_start * BS, b_end * BS
    if not HAS_INT8:
        m_i, l_i, acc = _decode_tiles(
            q, m_i, l_i, acc, K, V, KQ, VQ, KS, VS, TABLES, seq, kvh, lo, hi, kv_len, lo_pos, scale, max_blocks,
            stride_kb, stride_ks, stride_kh, stride_qkb, stride_qks, stride_qkh, stride_sb, dims, dim_ok,
            BS, BLOCK_N, 0, SOFTCAP, HAS_SOFTCAP)
    elif INT8_MODE == 4:
        # bounds of each kind of block in this program's range (a read of its block-table entries)
        hot_lo, hot_hi, warm_lo, warm_hi = b_end, b_start, b_end, b_start
        for b0 in range(b_start, b_end, 128):
            bi = b0 + tl.arange(0, 128)
            e = tl.load(TABLES + seq * max_blocks + bi, mask=(bi < b_end) & (bi < max_blocks), other=-1)
            is_hot = e >= 0
            is_warm = e <= -2
            hot_lo = tl.minimum(hot_lo, tl.min(tl.where(is_hot, bi, b_end), axis=0))
            hot_hi = tl.maximum(hot_hi, tl.max(tl.where(is_hot, bi + 1, b_start), axis=0))
            warm_lo = tl.minimum(warm_lo, tl.min(tl.where(is_warm, bi, b_end), axis=0))
            warm_hi = tl.maximum(warm_hi, tl.max(tl.where(is_warm, bi + 1, b_start), axis=0))
        if warm_hi > warm_lo:  # warm-only loop over the warm blocks' span (hot ones in it masked)
            m_i, l_i, acc = _decode_tiles(
                q, m_i, l_i, acc, K, V, KQ, VQ, KS, VS, TABLES, seq, kvh, warm_lo * BS, warm_hi * BS, kv_len, lo_pos,
                scale, max_blocks, stride_kb, stride_ks, stride_kh, stride_qkb, stride_qks, stride_qkh, stride_sb,
                dims, dim_ok, BS, BLOCK_NW, 1, SOFTCAP, HAS_SOFTCAP, INT8_CONV)
        if hot_hi > hot_lo:  # hot-only loop over the hot blocks' span (warm ones in it masked)
            m_i, l_i, acc = _decode_tiles(
                q, m_i, l_i, acc, K, V, KQ, VQ, KS, VS, TABLES, seq, kvh, hot_lo * BS, hot_hi * BS, kv_len, lo_pos,
                scale, max_blocks, stride_kb, stride_ks, stride_kh, stride_qkb, stride_qks, stride_qkh, stride_sb,
                dims, dim_ok, BS, BLOCK_N, 0, SOFTCAP, HAS_SOFTCAP)
    else:
        m_i, l_i, acc = _decode_tiles(
            q, m_i, l_i, acc, K, V, KQ, VQ, KS, VS, TABLES, seq, kvh, lo, hi, kv_len, lo_pos, scale, max_blocks,
            stride_kb, stride_ks, stride_kh, stride_qkb, stride_qks, stride_qkh, stride_sb, dims, dim_ok,
            BS, BLOCK_N, INT8_MODE, SOFTCAP, HAS_SOFTCAP)
    l_safe = tl.where(l_i > 0, l_i, 1.0)
    out = acc / l_safe[:, None]
    lse = tl.where(l_i > 0, (m_i + tl.log2(l_safe)) / 1.4426950408889634, float("-inf"))
    tl.store(OUT_PART + seq * stride_ob + heads[:, None] * stride_oh + split * stride_os + dims[None, :], out,
             mask=row_ok[:, None] & dim_ok[None, :])
    tl.store(LSE_PART + seq * stride_lb + heads * stride_lh + split, lse, mask=row_ok)


@triton.jit(do_not_specialize=["n_splits"])
def _decode_merge_kernel(
    OUT_PART, LSE_PART, OUT, LSE, n_splits,
    stride_ob, stride_oh, stride_os, stride_lb, stride_lh, stride_fb, stride_fh,
    D: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_S: tl.constexpr,
):
    seq = tl.program_id(0)
    head = tl.program_id(1)
    splits = tl.arange(0, BLOCK_S)
    s_ok = splits < n_splits
    dims = tl.arange(0, BLOCK_D)
    d_ok = dims < D
    lse = tl.load(LSE_PART + seq * stride_lb + head * stride_lh + splits, mask=s_ok, other=float("-inf"))
    m = tl.max(lse, axis=0)
    m_safe = tl.where(m == float("-inf"), 0.0, m)
    w = tl.exp(lse - m_safe)
    total = tl.sum(w, axis=0)
    parts = tl.load(OUT_PART + seq * stride_ob + head * stride_oh + splits[:, None] * stride_os + dims[None, :],
                    mask=s_ok[:, None] & d_ok[None, :], other=0.0)
    out = tl.sum(parts * w[:, None], axis=0) / tl.where(total > 0, total, 1.0)
    tl.store(OUT + seq * stride_fb + head * stride_fh + dims, out.to(OUT.dtype.element_ty), mask=d_ok)
    tl.store(LSE + seq * tl.num_programs(1) + head, m_safe + tl.log(tl.where(total > 0, total, 1.0)))


# Decode launch shapes chosen by measurement, per call shape: key -> (num_splits, block_n, INT8 loop
# mode: 4 tiered, 3 branch-free, see _decode_split_kernel; the warm loop's block_n; num_warps;
# num_stages). A key is
# (batch rounded up to a power of two, heads, kv_heads, head_dim, dtype, INT8 pages?, window?, context blocks rounded up to a
# power of two). Filled on the first call of a shape that is not being captured into a CUDA graph
# (the graph runner's warm-up run comes first, so graphs replay the tuned shape), or from the
# disk cache of earlier processes on the same GPU and software (longdoc_kernels/tuning_cache.py;
# not yet run on a GPU when it was written, 2026-12-03: its CPU tests stub the device queries).
DECODE_TUNED: dict[tuple, tuple[int, ...]] = {}
# per device: the tuning cache's fingerprint and the choices stored under it, read once
_DISK_TUNED: dict[int, tuple[str, dict[str, tuple[int, ...]]]] = {}
log = logging.getLogger(__name__)
DECODE_TUNING = os.environ.get("LONGDOC_DECODE_TUNING", "1") != "0"


def _disk_tuned(device: torch.device) -> tuple[str, dict[str, tuple[int, ...]]]:
    """(fingerprint, stored choices) for `device`, read from the tuning cache once per process."""
    idx = device.index if device.index is not None else torch.cuda.current_device()
    if idx not in _DISK_TUNED:
        try:
            fp = tuning_cache.fingerprint(torch.cuda.get_device_name(idx), torch.cuda.get_device_capability(idx),
                                          torch.__version__, triton.__version__)
            _DISK_TUNED[idx] = (fp, tuning_cache.load(fp))
        except Exception as e:  # the disk cache is an optimisation: never let it stop a decode
            log.warning("decode tuning cache unavailable (%s: %s); tuning in memory only", type(e).__name__, e)
            _DISK_TUNED[idx] = ("", {})
    return _DISK_TUNED[idx]


def _default_splits(b: int, kvh: int, n_blocks: int, device: torch.device) -> int:
    """~2 programs per SM across the batch, each split >= 8 blocks."""
    sms = torch.cuda.get_device_properties(device).multi_processor_count if device.type == "cuda" else 8
    return max(1, min(triton.cdiv(2 * sms, max(b * kvh, 1)), triton.cdiv(n_blocks, 8), 64))


def _tuning_tables(b: int, max_kv_len: int, bs: int, n_hot: int, n_warm: int | None, device) -> tuple:
    """Block tables and lengths the tuner times on, in place of the caller's: every sequence at
    `max_kv_len` (the bound the launch is sized for) over blocks spread through the pools, with
    INT8 pages laid out as the cache lays them (the first block and the last 32 hot, the rest
    warm). The caller's own tables may describe anything (the CUDA-graph warm-up decodes one
    token of scratch per row), and a shape is tuned once for every later call; only reads happen,
    so any block id within the pools serves."""
    width = max(1, triton.cdiv(max_kv_len, bs))
    gen = torch.Generator(device=device).manual_seed(0)
    tables = torch.randint(0, n_hot, (b, width), generator=gen, device=device, dtype=torch.int32)
    if n_warm:
        j = torch.arange(width, device=device)
        warm = torch.randint(0, n_warm, (b, width), generator=gen, device=device, dtype=torch.int32)
        tables = torch.where(((j > 0) & (j < width - 32))[None, :], -warm - 2, tables)
    return tables, torch.full((b,), max_kv_len, dtype=torch.int32, device=device)


def _decode_candidates(d: int, has_int8: bool) -> list[tuple[int, int, int, int, int]]:
    """The launch shapes the tuner times at each split count: (block_n, INT8 mode, warm block_n,
    num_warps, num_stages); the first is the expected best."""
    if has_int8 and d <= 128:
        return [(64, 4, 128, 4, 3), (64, 4, 64, 4, 3), (64, 3, 64, 4, 3)]
    if has_int8:
        # head_dim 256: 128-key hot tiles at 3 stages run out of shared memory; unpipelined (1 stage)
        # the warm loop's 64-key tiles with 8 warps (b1) and 128-key tiles with 4 (b16) were the fastest
        # (H100, graph-timed, benchmarks/probe_decode_hd256.py: BENCHMARKS.md 2026-12-07, tenth session)
        return [(64, 4, 64, 8, 1), (64, 4, 128, 4, 1), (64, 4, 64, 4, 3), (32, 4, 32, 4, 3)]
    if d <= 128:
        return [(bn, 4, bn, 4, 3) for bn in (64, 128)]
    return [(32, 4, 32, 4, 3), (64, 4, 64, 4, 3), (64, 4, 64, 8, 1), (64, 4, 64, 4, 2)]


def _tune_decode(launch, key: tuple, base_splits: int, n_blocks: int, d: int, has_int8: bool, device) -> tuple:
    """Time a few (num_splits, block_n, INT8 mode, warm block_n, num_warps, num_stages) candidates
    as a CUDA graph replays them (longdoc_kernels/timing.py: a single launch between events would
    time the host) over `_tuning_tables`, and keep the fastest for `key`. All candidates compute the
    same function."""
    from longdoc_kernels.timing import graph_time

    sms = torch.cuda.get_device_properties(device).multi_processor_count
    others = {max(1, min(x, triton.cdiv(n_blocks, 4), 4 * sms))
              for x in (base_splits // 2, 2 * base_splits, 4 * base_splits, 8 * base_splits)}
    splits = [base_splits] + sorted(others - {base_splits})
    shapes = _decode_candidates(d, has_int8)
    best, best_t = (base_splits, *shapes[0]), float("inf")
    failures = []
    for shape in shapes:
        for ns in splits:
            try:
                t = graph_time(lambda ns=ns, shape=shape: launch(ns, *shape), reps=10, replays=3)
            except Exception as e:  # a tile shape this Triton cannot compile for the layout: skip it
                failures.append(f"{(ns, *shape)}: {type(e).__name__}: {str(e)[:160]}")
                continue
            # the default comes first; another candidate must beat the best by 5%, so noise does
            # not flip the choice (and with it the rounding) between processes
            if t < 0.95 * best_t or best_t == float("inf"):
                best, best_t = (ns, *shape), t
    if failures:
        log.warning("decode tuner %s: %d of %d candidates failed (first: %s); chose %s", key, len(failures),
                    len(shapes) * len(splits), failures[0], best)
    DECODE_TUNED[key] = best
    return best


def paged_decode(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_tables: torch.Tensor,
    kv_lens: torch.Tensor,
    *,
    scale: float,
    window: int | None = None,
    softcap: float | None = None,
    k_cache_int8: torch.Tensor | None = None,
    v_cache_int8: torch.Tensor | None = None,
    k_scale: torch.Tensor | None = None,
    v_scale: torch.Tensor | None = None,
    num_splits: int | None = None,
    max_kv_len: int | None = None,
    block_n: int | None = None,
    int8_mode: int | None = None,
    int8_conv: int = 0,
    block_n_warm: int | None = None,
    num_warps: int = 4,
    num_stages: int | None = None,
    maxnreg: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """One query per sequence: q [B, H, D]; block_tables [B, max_blocks] int (entries as in
    longdoc_kernels/__init__.py); kv_lens [B] including the token being decoded. Returns out [B, H, D]
    (q's dtype) and lse [B, H] float32.

    `max_kv_len` (an upper bound of kv_lens, known to the caller) sizes the context splits
    without a device-to-host read, which keeps the call capturable in a CUDA graph. Unless
    `num_splits` / `block_n` are given, they come from `DECODE_TUNED` (measured on the first
    uncaptured call of the shape, see `_tune_decode`), else from the default heuristic.
    `block_n_warm` is the warm loop's tile in INT8 mode 4 (default: block_n).
    `maxnreg` caps the kernel's registers a thread (ptx .maxnreg: more programs an SM, at the
    risk of spills)."""
    b, h, d = q.shape
    bs = k_cache.shape[1]
    kvh = k_cache.shape[2]
    group = h // kvh
    has_int8 = k_cache_int8 is not None
    if max_kv_len is None:
        max_kv_len = int(kv_lens.max()) if b else 0
    span = min(max_kv_len, window) if window is not None else max_kv_len
    n_blocks = max(1, triton.cdiv(span, bs) + 1)
    out = torch.empty_like(q)
    lse = torch.empty((b, h), dtype=torch.float32, device=q.device)
    if b == 0:
        return out, lse
    block_d = triton.next_power_of_2(d)
    tables = block_tables.to(torch.int32).contiguous()
    lens = kv_lens.to(torch.int32).contiguous()
    kq = k_cache_int8 if has_int8 else k_cache
    vq = v_cache_int8 if has_int8 else v_cache
    ks = k_scale if has_int8 else lse  # unused placeholders when there is no warm pool
    vs = v_scale if has_int8 else lse
    interp = _interpreting()
    group_pad = max(triton.next_power_of_2(group), 16)  # tl.dot needs >= 16 rows
    assert v_cache.stride() == k_cache.stride() and vq.stride() == kq.stride(), "K and V pools must share a layout"

    def launch(ns: int, bn: int, mode: int = 4, bnw: int | None = None, warps: int = num_warps,
               stages: int | None = num_stages, tabs=None, kvl=None) -> None:
        bps = triton.cdiv(n_blocks, ns)
        tabs = tables if tabs is None else tabs
        out_part = torch.empty((b, h, ns, d), dtype=torch.float32, device=q.device)
        lse_part = torch.empty((b, h, ns), dtype=torch.float32, device=q.device)
        _decode_split_kernel[(b, kvh, ns)](
            q, k_cache, v_cache, kq, vq, ks, vs, tabs, lens if kvl is None else kvl, out_part, lse_part,
            scale, window or 0, tabs.shape[1], bps,
            q.stride(0), q.stride(1),
            k_cache.stride(0), k_cache.stride(1), k_cache.stride(2),
            kq.stride(0), kq.stride(1), kq.stride(2),
            ks.stride(0),
            out_part.stride(0), out_part.stride(1), out_part.stride(2),
            lse_part.stride(0), lse_part.stride(1),
            GROUP=group, GROUP_PAD=group_pad, BS=bs, D=d, BLOCK_D=block_d, BLOCK_N=bn,
            HAS_WINDOW=window is not None, HAS_INT8=has_int8,
            SOFTCAP=float(softcap or 0.0), HAS_SOFTCAP=softcap is not None,
            UPCAST=interp or q.dtype == torch.float32, INT8_MODE=mode, INT8_CONV=int8_conv,
            BLOCK_NW=bnw or bn, num_warps=warps, num_stages=1 if interp else (stages or 3),
            **({"maxnreg": maxnreg} if maxnreg and not interp else {}),
        )
        _decode_merge_kernel[(b, h)](
            out_part, lse_part, out, lse, ns,
            out_part.stride(0), out_part.stride(1), out_part.stride(2), lse_part.stride(0), lse_part.stride(1),
            out.stride(0), out.stride(1),
            D=d, BLOCK_D=block_d, BLOCK_S=max(triton.next_power_of_2(ns), 2),
        )

    # BLOCK_N 32 with INT8 pages fails to compile in Triton 3.6 (an MMA layout assertion, H200,
    # 2026-12-02): INT8 calls use 64 whatever the head_dim
    default_bn = 16 if interp else (64 if d <= 128 or has_int8 else 32)
    mode = 4 if int8_mode is None else int8_mode
    # launches are chosen per batch bucket (the next power of two, as the CUDA-graph runner pads
    # batches): an eager step of 3 sequences and a graph replay padded to 4 run the same splits,
    # hence the same arithmetic for every real row
    b_bucket = triton.next_power_of_2(b)
    if num_splits is None and block_n is None and int8_mode is None and q.is_cuda and not interp and DECODE_TUNING:
        key = (b_bucket, h, kvh, d, q.dtype, has_int8, window is not None, triton.next_power_of_2(n_blocks))
        tuned = DECODE_TUNED.get(key)
        if tuned is None:
            fp, disk = _disk_tuned(q.device)
            tuned = disk.get(tuning_cache.key_str(key))
            if tuned is not None:
                DECODE_TUNED[key] = tuned
        if tuned is None and not torch.cuda.is_current_stream_capturing():
            synth = _tuning_tables(b, max_kv_len, bs, k_cache.shape[0], kq.shape[0] if has_int8 else None, q.device)
            tuned = _tune_decode(lambda *a: launch(*a, tabs=synth[0], kvl=synth[1]), key,
                                 _default_splits(b_bucket, kvh, n_blocks, q.device),
                                 n_blocks, d, has_int8, q.device)
            if fp:  # for later processes (this one finds it in DECODE_TUNED from now on)
                tuning_cache.store(fp, tuning_cache.key_str(key), tuned)
        if tuned is not None:
            num_splits, block_n, mode, block_n_warm, num_warps, num_stages = tuned
    if num_splits is None:
        num_splits = _default_splits(b_bucket, kvh, n_blocks, q.device)
    launch(num_splits, block_n or default_bn, mode, block_n_warm, num_warps, num_stages)
    return out, lse
