"""Small fused kernels for the launch-bound decode step: residual add with the RMSNorms around
it, and the gated MLP's activation times up-projection.

At batch 1 a decoder layer's elementwise ops are microsecond kernels; each costs a launch slot
inside the CUDA graph whatever its size. These fuse them without changing a single rounding:
every intermediate is rounded to the activation dtype exactly where engine.model.layers' unfused torch
code rounds it (that code is the reference, see longdoc_kernels/reference.py).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def _norm_row(x, w, ok, n_cols, eps, GEMMA: tl.constexpr, OUT_DTYPE: tl.constexpr):
    """longdoc_kernels/rmsnorm.py's arithmetic on one float32 row (masked lanes hold 0)."""
    var = tl.sum(x * x, axis=0) / n_cols
    xn = x * tl.rsqrt(var + eps)
    if GEMMA:
        y = xn * w
    else:
        y = xn.to(OUT_DTYPE).to(tl.float32) * w
    return y.to(OUT_DTYPE)


@triton.jit
def _add_norm_kernel(X, H, WP, WN, XO, Y, n_cols, eps, stride_x, stride_h,
                     HAS_POST: tl.constexpr, HAS_NEXT: tl.constexpr, GEMMA: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)  # row * stride passes 2**31 in a long prefill
    cols = tl.arange(0, BLOCK)
    ok = cols < n_cols
    dt = XO.dtype.element_ty
    h = tl.load(H + row * stride_h + cols, mask=ok, other=0.0)
    if HAS_POST:
        wp = tl.load(WP + cols, mask=ok, other=0.0).to(tl.float32)
        h = _norm_row(h.to(tl.float32), wp, ok, n_cols, eps, GEMMA, dt)
    x = tl.load(X + row * stride_x + cols, mask=ok, other=0.0)
    xs = (x.to(tl.float32) + h.to(tl.float32)).to(dt)
    tl.store(XO + row * n_cols + cols, xs, mask=ok)
    if HAS_NEXT:
        wn = tl.load(WN + cols, mask=ok, other=0.0).to(tl.float32)
        tl.store(Y + row * n_cols + cols, _norm_row(xs.to(tl.float32), wn, ok, n_cols, eps, GEMMA, dt), mask=ok)


def add_rms_norm(x: torch.Tensor, h: torch.Tensor, w_post: torch.Tensor | None, w_next: torch.Tensor | None,
                 eps: float, gemma: bool) -> tuple[torch.Tensor, torch.Tensor | None]:
    """x, h [rows, D]. x_new = x + (norm(h, w_post) if w_post is given else h); returns
    (x_new, norm(x_new, w_next) or None). Weights as longdoc_kernels/rmsnorm.py takes them (Gemma: the
    float32 multiplier 1 + w)."""
    rows, d = x.shape
    if x.stride(-1) != 1:
        x = x.contiguous()
    if h.stride(-1) != 1:
        h = h.contiguous()
    xo = torch.empty((rows, d), dtype=x.dtype, device=x.device)
    y = torch.empty_like(xo) if w_next is not None else None
    if rows:
        block = triton.next_power_of_2(d)
        _add_norm_kernel[(rows,)](
            x, h, w_post if w_post is not None else x, w_next if w_next is not None else x, xo,
            y if y is not None else xo, d, eps, x.stride(0), h.stride(0),
            HAS_POST=w_post is not None, HAS_NEXT=w_next is not None, GEMMA=gemma, BLOCK=block,
            num_warps=4 if block <= 1024 else 8,
        )
    return xo, y


@triton.jit
def _act_mul_kernel(GU, Y, f, stride_g, GELU: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)  # 128K rows x 2 x 14336 (8B gate/up) passes 2**31
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    ok = cols < f
    dt = Y.dtype.element_ty
    g = tl.load(GU + row * stride_g + cols, mask=ok, other=0.0).to(tl.float32)
    u = tl.load(GU + row * stride_g + f + cols, mask=ok, other=0.0).to(tl.float32)
    if GELU:  # tanh approximation, tanh(z) = 1 - 2 / (exp(2z) + 1)
        z = 0.7978845608028654 * (g + 0.044715 * g * g * g)
        a = 0.5 * g * (2.0 - 2.0 / (tl.exp(2.0 * z) + 1.0))
    else:
        a = g / (1.0 + tl.exp(-g))
    tl.store(Y + row * f + cols, (a.to(dt).to(tl.float32) * u).to(dt), mask=ok)


def act_mul(gu: torch.Tensor, gelu: bool) -> torch.Tensor:
    """gu [rows, 2F] = [gate | up] (the fused gate/up projection's output). Returns
    act(gate) * up [rows, F], act SiLU or tanh-GELU, rounded as torch rounds act(g) then the
    product."""
    rows, f2 = gu.shape
    f = f2 // 2
    if gu.stride(-1) != 1:
        gu = gu.contiguous()
    y = torch.empty((rows, f), dtype=gu.dtype, device=gu.device)
    if rows:
        block = min(1024, triton.next_power_of_2(f))
        _act_mul_kernel[(rows, triton.cdiv(f, block))](gu, y, f, gu.stride(0), GELU=gelu, BLOCK=block)
    return y
