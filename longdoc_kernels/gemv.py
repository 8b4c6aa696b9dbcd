"""Skinny matmul for the decode step: y = x @ W^T with x [M, K] of a few rows (M <= 16) and W [N, K].

A decode step at batch 1-16 reads every weight matrix once and does almost no arithmetic per
byte, so its speed is the rate at which W streams from HBM. This kernel tiles W along N (and, for
tall-K matrices, along K into a fixed number of splits), streams [BLOCK_N, BLOCK_K] tiles with
software pipelining, and multiplies on the tensor cores with x padded to 16 rows.

Two properties a library GEMV does not promise:
- **batch invariance**: the launch shape depends on (N, K) only, never on M, and each output
  element is reduced in the same order whatever the other rows are, so a sequence's logits do
  not change with the batch it happens to be decoded in;
- **determinism**: K splits are summed in a fixed order (a second pass over the float32
  partials, no atomics).

`gemv_reference` is the torch reference (float32 math).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def _gemv_kernel(
    X, W, P, M, N, K, k_per_split,
    stride_xm, stride_wn, stride_ps, stride_pm,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, EVEN: tl.constexpr,
):
    pid_n = tl.program_id(0)
    pid_s = tl.program_id(1)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rm = tl.arange(0, BLOCK_M)
    rk = tl.arange(0, BLOCK_K)
    n_ok = rn < N
    m_ok = rm < M
    acc = tl.zeros([BLOCK_M, BLOCK_N], tl.float32)
    k_lo = pid_s * k_per_split
    for k0 in range(k_lo, k_lo + k_per_split, BLOCK_K):
        kk = k0 + rk
        if EVEN:  # N % BLOCK_N == 0 and K % (splits * BLOCK_K) == 0: no masks on the weight stream
            w = tl.load(W + rn[:, None] * stride_wn + kk[None, :])
            x = tl.load(X + rm[:, None] * stride_xm + kk[None, :], mask=m_ok[:, None], other=0.0)
        else:
            k_ok = kk < K
            w = tl.load(W + rn[:, None] * stride_wn + kk[None, :], mask=n_ok[:, None] & k_ok[None, :], other=0.0)
            x = tl.load(X + rm[:, None] * stride_xm + kk[None, :], mask=m_ok[:, None] & k_ok[None, :], other=0.0)
        acc += tl.dot(x, tl.trans(w))
    tl.store(P + pid_s * stride_ps + rm[:, None] * stride_pm + rn[None, :], acc, mask=m_ok[:, None] & n_ok[None, :])


@triton.jit
def _gemv_sum_kernel(P, Y, MN, n_splits, stride_ps, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    ok = offs < MN
    acc = tl.zeros([BLOCK], tl.float32)
    for s in range(0, n_splits):  # fixed order: deterministic
        acc += tl.load(P + s * stride_ps + offs, mask=ok, other=0.0)
    tl.store(Y + offs, acc.to(Y.dtype.element_ty), mask=ok)


# Launch shape per (N, K): (BLOCK_N, BLOCK_K, splits, num_warps, num_stages). Set by `tune_gemv`
# (bench / probe) or by the default rule in `_default_config`.
GEMV_CONFIGS: dict[tuple[int, int], tuple[int, int, int, int, int]] = {}
MAX_ROWS = 16


def _default_config(n: int, k: int, sms: int) -> tuple[int, int, int, int, int]:
    """BLOCK_N 64, BLOCK_K 128; split K until there are ~2 programs per SM (each split >= 1024
    columns). Measured on an H200 (see BENCHMARKS.md, "GEMV")."""
    block_n, block_k = 64, 128
    tiles = triton.cdiv(n, block_n)
    splits = 1
    while tiles * splits < 2 * sms and k // (splits * 2) >= 1024 and k % (splits * 2 * block_k) == 0:
        splits *= 2
    return block_n, block_k, splits, 4, 4


def gemv(x: torch.Tensor, w: torch.Tensor, config: tuple[int, int, int, int, int] | None = None,
         out: torch.Tensor | None = None) -> torch.Tensor:
    """x [M, K] (M <= 16), w [N, K] row-major, both of one dtype (bf16/fp16/fp32). Returns [M, N]."""
    m, k = x.shape
    n = w.shape[0]
    assert m <= MAX_ROWS and w.shape[1] == k and w.stride(1) == 1
    x = x.contiguous()
    if config is None:
        config = GEMV_CONFIGS.get((n, k))
        if config is None:
            sms = torch.cuda.get_device_properties(x.device).multi_processor_count if x.is_cuda else 8
            config = _default_config(n, k, sms)
    block_n, block_k, splits, warps, stages = config
    k_per_split = triton.cdiv(triton.cdiv(k, splits), block_k) * block_k
    splits = triton.cdiv(k, k_per_split)
    even = n % block_n == 0 and k % (splits * block_k) == 0 and k_per_split * splits == k
    y = out if out is not None else torch.empty((m, n), dtype=x.dtype, device=x.device)
    part = torch.empty((splits, m, n), dtype=torch.float32, device=x.device)
    _gemv_kernel[(triton.cdiv(n, block_n), splits)](
        x, w, part, m, n, k, k_per_split,
        x.stride(0), w.stride(0), part.stride(0), part.stride(1),
        BLOCK_M=16, BLOCK_N=block_n, BLOCK_K=block_k, EVEN=even, num_warps=warps, num_stages=stages,
    )
    block = 1024
    _gemv_sum_kernel[(triton.cdiv(m * n, block),)](part, y, m * n, splits, part.stride(0), BLOCK=block)
    return y


def gemv_reference(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return (x.float() @ w.float().t()).to(x.dtype)


def rotating(n: int, k: int, dtype=torch.bfloat16, device="cuda", min_bytes: int = 256 * 2**20) -> list[torch.Tensor]:
    """Enough [n, k] random matrices to exceed `min_bytes` together (L2 is 50 MB on an H100/H200):
    a timed graph cycling through them streams every weight from HBM, as a real decode step does
    with its distinct layers."""
    copies = max(2, -(-min_bytes // (n * k * torch.finfo(dtype).bits // 8)))
    return [torch.randn(n, k, device=device, dtype=dtype) for _ in range(copies)]


def time_rotating(fn, ws: list[torch.Tensor], x: torch.Tensor) -> float:
    """Seconds per call of fn(x, w) with w cycling through `ws`, as a CUDA graph replays it."""
    from longdoc_kernels.timing import graph_time

    state = {"i": 0}

    def call() -> None:
        fn(x, ws[state["i"] % len(ws)])
        state["i"] += 1

    return graph_time(call, reps=2 * len(ws), replays=5)


def tune_gemv(n: int, k: int, m: int = 1, dtype=torch.bfloat16, device="cuda",
              tiles=((64, 128), (64, 256), (128, 128), (128, 256), (32, 256), (32, 512)),
              split_options=(1, 2, 4, 8), warp_options=(4, 8), stage_options=(3, 4)) -> dict:
    """Time candidate launch shapes for W [n, k] with weights streaming from HBM (time_rotating)
    and store the fastest in GEMV_CONFIGS. Returns {config: seconds}."""
    ws = rotating(n, k, dtype, device)
    x = torch.randn(m, k, device=device, dtype=dtype)
    times = {}
    for bn, bk in tiles:
        for splits in split_options:
            if k % (splits * bk):
                continue
            for warps in warp_options:
                for stages in stage_options:
                    cfg = (bn, bk, splits, warps, stages)
                    try:
                        times[cfg] = time_rotating(lambda x_, w_, c=cfg: gemv(x_, w_, c), ws, x)
                    except Exception:  # out of shared memory for this tile: skip it
                        continue
    best = min(times, key=times.get)
    GEMV_CONFIGS[(n, k)] = best
    return times
