"""Weight-only INT8 on the CPU: every linear weight, the output layer and the embedding table kept
as int8 with one float scale per output row, multiplied by torch's CPU kernel
`torch._weight_int8pack_mm` (activations cast to bfloat16 for the call, the result back to the
activations' dtype).

Why: a CPU decode step reads every weight once per token, so it is bound by the bytes read. Gemma 3
270M in float32 reads about 1.07 GB per token, 0.67 GB of it the 262,144-row output layer; in int8
about a quarter of that. Measured on the 2-core AMD EPYC (AVX-512) host, one thread, one token
(`[1, 640] x [262144, 640]^T`): float32 77 ms, int8 28 ms, int4 (group 32) 18.5 ms; the layers'
small matrices (qkv 1536x640, o 640x1024, gate/up 4096x640, down 640x2048) are 0.04-0.2 ms either
way. `_weight_int8pack_mm` with float32 activations is 10-30x slower than with bfloat16 ones on
this torch (2.13), hence the cast. Held-text perplexity (Gemma 3 270M, 2,047 tokens of
data/samples/contracts/en-github-tos-2017-10-to-2018-05/v2.txt): int8 10.602, float32 10.559
(+0.41%). int4 would be faster on the output layer; not tried end to end.

`LoadConfig.weights` picks it: "int8", "float" (the dtype as loaded: the reference), or None: int8
for the packaged default model (`LLM(model=None)`) on the CPU when no dtype was named, float
everywhere else (HF folders and other GGUFs keep matching transformers exactly; `dtype="float32"`
means float32 weights). int8 results depend slightly on the batch (bfloat16 activations), so a
request batched with others may pick a different token than alone; float32 does not.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

WEIGHT_MODES = ("float", "int8")


class Int8Weight:
    """A [out, in] weight as int8 rows `q` and float32 per-row scales (`w ~= q * scale[:, None]`)."""

    def __init__(self, w: torch.Tensor) -> None:
        w = w.detach().float()
        amax = w.abs().amax(dim=1).clamp(min=1e-12)
        self.scale = (amax / 127.0).contiguous()
        self.q = torch.round(w / self.scale[:, None]).clamp_(-127, 127).to(torch.int8).contiguous()
        self.scale_bf16 = self.scale.to(torch.bfloat16)
        self.shape = tuple(w.shape)

    def matmul(self, x: torch.Tensor) -> torch.Tensor:
        """x [..., in] @ w.T -> [..., out] in x's dtype."""
        lead = x.shape[:-1]
        y = torch._weight_int8pack_mm(x.reshape(-1, x.shape[-1]).to(torch.bfloat16), self.q, self.scale_bf16)
        return y.to(x.dtype).reshape(*lead, self.shape[0])

    def rows(self, ids: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
        """Dequantised rows `ids` (the embedding lookup)."""
        return (self.q[ids].to(torch.float32) * self.scale[ids].unsqueeze(-1)).to(dtype)

    def dequantize(self) -> torch.Tensor:
        return self.q.float() * self.scale[:, None]

    @property
    def nbytes(self) -> int:
        return self.q.numel() + 6 * self.scale.numel()


def linear(x: torch.Tensor, w: torch.Tensor | Int8Weight, b: torch.Tensor | None = None) -> torch.Tensor:
    """F.linear for a float weight or an Int8Weight."""
    if isinstance(w, Int8Weight):
        y = w.matmul(x)
        return y + b if b is not None else y
    return F.linear(x, w, b)


class Int8Linear(nn.Module):
    """Stands in for an nn.Linear whose weight is an Int8Weight."""

    def __init__(self, lin: nn.Linear) -> None:
        super().__init__()
        self.qweight = Int8Weight(lin.weight)
        self.bias = lin.bias

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return linear(x, self.qweight, self.bias)


def default_weights(mode: str | None, device: torch.device, default_model: bool, dtype_given: bool = False) -> str:
    """Resolve `LoadConfig.weights` (see the module docstring); default_model: the LLM was given
    no model (the packaged Gemma 3 270M GGUF); dtype_given: the caller named a dtype, which then
    holds for every weight (int8 would compute in bfloat16 whatever it asked for)."""
    if mode is not None:
        if mode not in WEIGHT_MODES:
            raise ValueError(f"weights must be one of {WEIGHT_MODES} or None, not {mode!r}")
        return mode
    return "int8" if device.type == "cpu" and default_model and not dtype_given else "float"


def quantize_model(model: nn.Module) -> None:
    """Replace the model's float weights by Int8Weights in place (CPU only): fused q/k/v and
    gate/up, o_proj and down_proj, the output layer and the (tied) embedding table."""
    from engine.model.layers import MLP, Attention

    for m in list(model.modules()):
        if isinstance(m, Attention):
            if m.qkv is not None:
                w, b = m.qkv
                m.qkv = (Int8Weight(w), b)
                for p in (m.q_proj, m.k_proj, m.v_proj):
                    p.weight = None  # the fused weight is the one read; its slices go with it
            else:
                m.q_proj, m.k_proj, m.v_proj = Int8Linear(m.q_proj), Int8Linear(m.k_proj), Int8Linear(m.v_proj)
            m.o_proj = Int8Linear(m.o_proj)
        elif isinstance(m, MLP):
            if m.gate_up is not None:
                m.gate_up = Int8Weight(m.gate_up)
                m.gate_proj.weight = m.up_proj.weight = None
            else:
                m.gate_proj, m.up_proj = Int8Linear(m.gate_proj), Int8Linear(m.up_proj)
            m.down_proj = Int8Linear(m.down_proj)
    model.quantize_embeddings()
