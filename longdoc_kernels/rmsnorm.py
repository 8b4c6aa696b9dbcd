"""RMSNorm in one Triton kernel (the torch version is ~8 kernels: upcast, square, mean, add, rsqrt,
two multiplies, downcast), for the decode step where every layer runs 2 (Llama) to 6 (Gemma 3:
sandwich norms and q/k norms) of them on a handful of rows and launch count, not bytes, is the cost.

Same arithmetic as `engine.model.layers.RMSNorm` (see `longdoc_kernels.reference.rms_norm`): the row upcast to
float32, x * rsqrt(mean(x^2) + eps), then Gemma: times the float32 multiplier (1 + w), cast once;
Llama: cast to the input dtype, times the weight (rounded again, as torch's bf16 product does).
The mean's summation order differs from torch's, so results may differ from the torch path by one
rounding step of the output dtype in rare elements.

Input [rows, D] or [rows, heads, D] with unit stride along D (any other strides: a strided view of
a fused q/k/v projection is read in place); output contiguous, same shape and dtype.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def _rms_norm_kernel(
    X, W, Y, n_cols, n_inner, stride_outer, stride_inner, eps,
    GEMMA: tl.constexpr, BLOCK: tl.constexpr,
):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    ok = cols < n_cols
    base = (row // n_inner) * stride_outer + (row % n_inner) * stride_inner
    x = tl.load(X + base + cols, mask=ok, other=0.0).to(tl.float32)
    var = tl.sum(x * x, axis=0) / n_cols
    xn = x * tl.rsqrt(var + eps)
    w = tl.load(W + cols, mask=ok, other=0.0).to(tl.float32)
    if GEMMA:
        y = xn * w
    else:
        y = xn.to(Y.dtype.element_ty).to(tl.float32) * w
    tl.store(Y + row * n_cols + cols, y.to(Y.dtype.element_ty), mask=ok)


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float, gemma: bool) -> torch.Tensor:
    """x [rows, D] or [rows, heads, D]; weight [D]: Gemma's float32 multiplier 1 + w, or Llama's w."""
    if x.stride(-1) != 1:
        x = x.contiguous()
    d = x.shape[-1]
    if x.dim() == 2:
        rows, n_inner, s_outer, s_inner = x.shape[0], 1, x.stride(0), 0
    elif x.dim() == 3:
        rows, n_inner, s_outer, s_inner = x.shape[0] * x.shape[1], x.shape[1], x.stride(0), x.stride(1)
    else:
        raise ValueError(f"rms_norm takes 2-D or 3-D input, got {tuple(x.shape)}")
    y = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    if rows:
        block = triton.next_power_of_2(d)
        _rms_norm_kernel[(rows,)](
            x, weight.contiguous(), y, d, max(n_inner, 1), s_outer, s_inner, eps,
            GEMMA=gemma, BLOCK=block, num_warps=4 if block <= 1024 else 8,
        )
    return y
