"""Shared layers of every family: RMSNorm (Llama and Gemma conventions), the gated MLP, attention
over the paged KV cache, and the decoder layer (pre-norm, or Gemma's sandwich norms).

Parameter names follow Hugging Face transformers (`self_attn.q_proj.weight`, ...) so that a HF
state dict loads as is and our weights load into a transformers model for the exactness tests.
Every op mirrors transformers' order of operations and dtype casts.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from torch import nn

from engine.model.config import ModelConfig
from engine.model.quant import Int8Linear, Int8Weight, linear, mlp_int8
from longdoc_kernels.cpu import available as _cpu_kernels  # the C kernels, or None

if TYPE_CHECKING:
    from engine.model.quant import Int8Weight
    from engine.runner.forward_context import ForwardContext


def _fused_path(x: torch.Tensor) -> bool:
    """Whether the fused Triton kernels (longdoc_kernels/fused.py, rope_kv.py) run for activations
    x [T, hidden] (longdoc_kernels.dispatch.fused_path). Elsewhere the torch code below runs: the
    reference that the fused kernels round like."""
    from longdoc_kernels import dispatch

    return dispatch.fused_path(x)


# Norms of at most this many values (a decode step's rows; a prefill chunk's are left to torch,
# which spreads them over threads) run as one C call where longdoc_kernels.cpu is built
_KERNEL_NORM_MAX = 16384
# rows up to which the attention's q/k norm, RoPE and cache write take one C call (`_forward_cpu`)
_KERNEL_ROWS = 64


class RMSNorm(nn.Module):
    """RMSNorm over the last dimension. Llama: w * x_norm.to(dtype); Gemma: (x_norm * (1 + w)).to(dtype)."""

    def __init__(self, dim: int, eps: float, gemma: bool) -> None:
        super().__init__()
        self.eps, self.gemma = eps, gemma
        self.weight = nn.Parameter(torch.empty(dim), requires_grad=False)
        self.multiplier: torch.Tensor | None = None  # Gemma: 1 + w in float32, set by prepare()

    def prepare(self) -> None:
        """Precompute what does not change between calls (after the weights are loaded)."""
        if self.gemma:
            self.multiplier = 1.0 + self.weight.float()

    def kernel_weight(self) -> torch.Tensor:
        """The weight as the Triton kernels take it: Gemma's float32 multiplier 1 + w, or w."""
        if self.gemma:
            return self.multiplier if self.multiplier is not None else 1.0 + self.weight.float()
        return self.weight

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.is_cuda and x.dim() in (2, 3) and x.shape[-1] <= 16384:  # one fused kernel (longdoc_kernels/rmsnorm.py)
            from longdoc_kernels import dispatch

            if dispatch.use_triton(x.device):
                return dispatch.rms_norm(x, self.kernel_weight(), self.eps, self.gemma)
        if x.dtype == torch.float32 and not x.is_cuda and (w := self.kernel_weight()).dtype == torch.float32:
            if x.numel() <= _KERNEL_NORM_MAX and (kernels := _cpu_kernels()) is not None:
                # a decode step's rows: one C call (longdoc_kernels/cpu), ~8 us against torch's ~20-50
                return kernels.rms_norm(x, w, self.eps)
            # one op instead of six (a CPU decode step runs 109 of them for Gemma 3 270M), the same
            # float32 arithmetic in the same order: equal bit for bit to the lines below
            # (tests/engine/model/test_layers_rmsnorm.py)
            return F.rms_norm(x, (x.shape[-1],), w, self.eps)
        xf = x.float()
        xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        if self.gemma:
            mult = self.multiplier if self.multiplier is not None else 1.0 + self.weight.float()
            return (xf * mult).type_as(x)
        return self.weight * xf.to(x.dtype)


class MLP(nn.Module):
    """down(act(gate(x)) * up(x))."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        h, f = config.hidden_size, config.intermediate_size
        self.gate_proj = nn.Linear(h, f, bias=False)
        self.up_proj = nn.Linear(h, f, bias=False)
        self.down_proj = nn.Linear(f, h, bias=False)
        self.gelu = config.hidden_act.startswith("gelu")
        self.tp = None  # tensor parallelism (engine/parallel): this rank's rows of gate/up, columns of down
        self.gate_up: torch.Tensor | Int8Weight | None = None  # [2F, H]: gate and up rows, set by fuse()

    def fuse(self) -> None:
        """One [gate; up] weight, with gate_proj/up_proj re-pointed at its halves (no extra memory):
        one matmul instead of two per call."""
        f = self.gate_proj.weight.shape[0]
        fused = torch.cat([self.gate_proj.weight, self.up_proj.weight])
        self.gate_proj.weight = nn.Parameter(fused[:f], requires_grad=False)
        self.up_proj.weight = nn.Parameter(fused[f:], requires_grad=False)
        self.gate_up = fused

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if type(self.gate_up) is Int8Weight and type(self.down_proj) is Int8Linear and self.down_proj.bias is None \
                and (out := mlp_int8(x, self.gate_up, self.down_proj.qweight, self.gelu)) is not None:
            # a CPU decode step's rows: the whole MLP as one C call (longdoc_kernels/cpu)
            return self.tp.all_reduce(out) if self.tp is not None else out
        if self.gate_up is not None and _fused_path(x):  # act(gate) * up in one launch, same roundings
            from longdoc_kernels import dispatch

            out = self.down_proj(dispatch.act_mul(F.linear(x, self.gate_up), self.gelu))
        else:
            if self.gate_up is not None:
                g, u = linear(x, self.gate_up).chunk(2, dim=-1)
            else:
                g, u = self.gate_proj(x), self.up_proj(x)
            g = F.gelu(g, approximate="tanh") if self.gelu else F.silu(g)
            out = self.down_proj(g * u)
        return self.tp.all_reduce(out) if self.tp is not None else out  # the row-parallel down's partial sums


class Attention(nn.Module):
    """q/k/v projections, optional q/k RMSNorm, RoPE, write K/V to the cache, backend attention, o_proj."""

    cpu_joint = True  # the CPU path with q and k normed and rotated together (`_forward_cpu`)

    def __init__(self, config: ModelConfig, layer: int) -> None:
        super().__init__()
        self.layer = layer
        self.num_heads, self.num_kv_heads, self.head_dim = config.num_heads, config.num_kv_heads, config.head_dim
        self.window = config.layer_windows[layer]
        self.scale = config.attn_scale
        self.softcap = config.attn_softcap
        h, bias = config.hidden_size, config.attention_bias
        self.q_proj = nn.Linear(h, self.num_heads * self.head_dim, bias=bias)
        self.k_proj = nn.Linear(h, self.num_kv_heads * self.head_dim, bias=bias)
        self.v_proj = nn.Linear(h, self.num_kv_heads * self.head_dim, bias=bias)
        self.o_proj = nn.Linear(self.num_heads * self.head_dim, h, bias=False)
        self.qkv: tuple[torch.Tensor | Int8Weight, torch.Tensor | None] | None = None  # set by fuse()
        self.tp = None  # tensor parallelism (engine/parallel): this rank's heads, its columns of o_proj
        self.qk_norm = config.qk_norm
        if config.qk_norm:
            self.q_norm = RMSNorm(self.head_dim, config.rms_norm_eps, config.gemma_norm)
            self.k_norm = RMSNorm(self.head_dim, config.rms_norm_eps, config.gemma_norm)

    def fuse(self) -> None:
        """One [q; k; v] weight (and bias), the three projections re-pointed at its slices."""
        projs = (self.q_proj, self.k_proj, self.v_proj)
        sizes = [p.weight.shape[0] for p in projs]
        w = torch.cat([p.weight for p in projs])
        b = torch.cat([p.bias for p in projs]) if self.q_proj.bias is not None else None
        for p, ws, bs in zip(projs, w.split(sizes), b.split(sizes) if b is not None else (None,) * 3, strict=True):
            p.weight = nn.Parameter(ws, requires_grad=False)
            if bs is not None:
                p.bias = nn.Parameter(bs, requires_grad=False)
        self.qkv = (w, b)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, ctx: ForwardContext) -> torch.Tensor:
        from engine.model.rope import apply_rope

        t = x.shape[0]
        if self.qkv is not None and self.cpu_joint and not x.is_cuda:
            return self._forward_cpu(x, cos, sin, ctx)
        if self.qkv is not None:
            nq, nkv = self.num_heads * self.head_dim, self.num_kv_heads * self.head_dim
            q, k, v = linear(x, *self.qkv).split([nq, nkv, nkv], dim=-1)
        else:
            q, k, v = self.q_proj(x), self.k_proj(x), self.v_proj(x)
        q = q.reshape(t, self.num_heads, self.head_dim)
        k = k.reshape(t, self.num_kv_heads, self.head_dim)
        v = v.reshape(t, self.num_kv_heads, self.head_dim)
        if self.qk_norm:
            q, k = self.q_norm(q), self.k_norm(k)
        rotated = ctx.rope_write(self.layer, q, k, v, cos, sin)  # on the GPU: one fused launch
        if rotated is not None:
            q, k = rotated  # k: None in a decode step (its attention reads the cache)
            out = ctx.attend(self.layer, self.window, self.scale, self.softcap, q, k, None if k is None else v,
                             written=True)
        else:
            q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
            out = ctx.attend(self.layer, self.window, self.scale, self.softcap, q, k, v)
        out = self.o_proj(out.reshape(t, self.num_heads * self.head_dim))
        return self.tp.all_reduce(out) if self.tp is not None else out  # the row-parallel o_proj's partial sums

    def _forward_cpu(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, ctx: ForwardContext) -> torch.Tensor:
        """`forward` on the CPU, where a decode step is bound by the count of small operations: q and
        k stay one [T, heads + kv_heads, head_dim] view of the fused projection, normed (q/k norm)
        and rotated together. Bit for bit what the separate path computes
        (tests/engine/model/test_layers_cpu_attention.py)."""
        from engine.model.rope import apply_rope_rolled

        t, h, kvh, d = x.shape[0], self.num_heads, self.num_kv_heads, self.head_dim
        qkv = linear(x, *self.qkv)
        v = qkv[:, (h + kvh) * d :].reshape(t, kvh, d)
        if t <= _KERNEL_ROWS and qkv.dtype == torch.float32:
            # decode steps and short chunks: q/k norm, RoPE and the cache write in one C call
            w = self._joint_qk_weight(qkv) if self.qk_norm else None
            if (w is not None or not self.qk_norm) and (
                    qk := ctx.cpu_rope_write(self.layer, qkv, h, kvh, w, self.q_norm.eps if self.qk_norm else 0.0,
                                             cos, sin)) is not None:
                out = ctx.attend(self.layer, self.window, self.scale, self.softcap, qk[:, :h], qk[:, h:], v,
                                 written=True)
                out = self.o_proj(out.reshape(t, h * d))
                return self.tp.all_reduce(out) if self.tp is not None else out
        qk = qkv[:, : (h + kvh) * d].reshape(t, h + kvh, d)
        if self.qk_norm:
            w = self._joint_qk_weight(qk)
            if w is None:
                qk = torch.cat((self.q_norm(qk[:, :h]), self.k_norm(qk[:, h:])), dim=1)
            elif qk.numel() <= _KERNEL_NORM_MAX and (kernels := _cpu_kernels()) is not None:
                qk = kernels.rms_norm(qk, w, self.q_norm.eps)  # every head's norm and weight in one C call
            else:  # one norm, then each head's weight: F.rms_norm's own order (normalise, then scale)
                qk = F.rms_norm(qk, (d,), None, self.q_norm.eps) * w
        qk = apply_rope_rolled(qk, cos, sin)
        out = ctx.attend(self.layer, self.window, self.scale, self.softcap, qk[:, :h], qk[:, h:], v)
        out = self.o_proj(out.reshape(t, h * d))
        return self.tp.all_reduce(out) if self.tp is not None else out

    def _joint_qk_weight(self, qk: torch.Tensor) -> torch.Tensor | None:
        """[heads + kv_heads, head_dim]: q_norm's weight for the q heads, k_norm's for the k heads,
        as RMSNorm multiplies by them in float32; None where RMSNorm would not take its one-op
        float32 path (then the norms run apart)."""
        wq, wk = self.q_norm.kernel_weight(), self.k_norm.kernel_weight()
        if qk.dtype != torch.float32 or wq.dtype != torch.float32 or wk.dtype != torch.float32:
            return None
        cached = getattr(self, "_qk_w", None)
        if cached is None or cached[0] is not wq or cached[1] is not wk:
            joint = torch.cat((wq.expand(self.num_heads, -1), wk.expand(self.num_kv_heads, -1)))
            self._qk_w = cached = (wq, wk, joint)
        return cached[2]


class DecoderLayer(nn.Module):
    """x + attn(norm(x)), then x + mlp(norm(x)); Gemma adds a norm after each of the two blocks."""

    def __init__(self, config: ModelConfig, layer: int) -> None:
        super().__init__()
        eps, gemma = config.rms_norm_eps, config.gemma_norm
        self.self_attn = Attention(config, layer)
        self.mlp = MLP(config)
        self.input_layernorm = RMSNorm(config.hidden_size, eps, gemma)
        self.post_attention_layernorm = RMSNorm(config.hidden_size, eps, gemma)
        self.sandwich = config.sandwich_norms
        if self.sandwich:
            self.pre_feedforward_layernorm = RMSNorm(config.hidden_size, eps, gemma)
            self.post_feedforward_layernorm = RMSNorm(config.hidden_size, eps, gemma)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, ctx: ForwardContext) -> torch.Tensor:
        if _fused_path(x):
            # the same arithmetic with the residual adds fused into the norms around them
            # (longdoc_kernels/fused.py): 2-3 launches fewer per layer in the launch-bound decode step
            from longdoc_kernels import dispatch

            eps, gemma = self.input_layernorm.eps, self.input_layernorm.gemma
            a = self.self_attn(self.input_layernorm(x), cos, sin, ctx)
            if self.sandwich:
                x, h = dispatch.add_rms_norm(x, a, self.post_attention_layernorm.kernel_weight(),
                                             self.pre_feedforward_layernorm.kernel_weight(), eps, gemma)
                return dispatch.add_rms_norm(x, self.mlp(h), self.post_feedforward_layernorm.kernel_weight(), None,
                                             eps, gemma)[0]
            x, h = dispatch.add_rms_norm(x, a, None, self.post_attention_layernorm.kernel_weight(), eps, gemma)
            return x + self.mlp(h)
        if self.sandwich and (w := self._sandwich_kernel(x)) is not None:
            # each residual add with the norms around it in one C call (longdoc_kernels/cpu)
            kernels, eps = w[3], self.post_attention_layernorm.eps
            x, h = kernels.add_rms_norm(x, self.self_attn(self.input_layernorm(x), cos, sin, ctx), w[0], w[1], eps)
            return kernels.add_rms_norm(x, self.mlp(h), w[2], None, eps)[0]
        if self.sandwich:
            h = self.post_attention_layernorm(self.self_attn(self.input_layernorm(x), cos, sin, ctx))
            x = x + h
            h = self.post_feedforward_layernorm(self.mlp(self.pre_feedforward_layernorm(x)))
            return x + h
        x = x + self.self_attn(self.input_layernorm(x), cos, sin, ctx)
        return x + self.mlp(self.post_attention_layernorm(x))

    def _sandwich_kernel(self, x: torch.Tensor) -> tuple | None:
        """(the float32 weights of the post-attention, pre-feedforward and post-feedforward norms,
        the kernels) where the C kernels take this step's rows x (float32 on the CPU, a decode
        step's size), else None."""
        if x.is_cuda or x.dtype != torch.float32 or x.dim() != 2 or x.numel() > _KERNEL_NORM_MAX \
                or (kernels := _cpu_kernels()) is None:
            return None
        ws = (self.post_attention_layernorm.kernel_weight(), self.pre_feedforward_layernorm.kernel_weight(),
              self.post_feedforward_layernorm.kernel_weight())
        return (*ws, kernels) if all(w.dtype == torch.float32 for w in ws) else None
