"""Rotary position embeddings: per-layer bases and the scaling types linear, dynamic (NTK-aware),
YaRN and llama3.

Positions are always global (the token's index in its sequence), so a chunked prefill rotates
exactly like a one-shot one. The inverse frequencies follow transformers' `modeling_rope_utils`
formula by formula, so that logits match its models.

Dynamic NTK: transformers recomputes the base from the length of the current forward pass. The
engine fixes it once per sequence from the sequence's length when its prompt is complete
(`seq_len` below), so that every chunking of the same prompt gives the same rotation; for a
one-shot prefill this equals transformers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

ROPE_TYPES = ("default", "linear", "dynamic", "yarn", "llama3")


@dataclass(frozen=True)
class RopeConfig:
    """RoPE of one layer. `original_max_position_embeddings` defaults to the model's max positions."""

    theta: float = 10000.0
    rope_type: str = "default"
    factor: float = 1.0
    original_max_position_embeddings: int | None = None
    low_freq_factor: float = 1.0
    high_freq_factor: float = 4.0
    beta_fast: float = 32.0
    beta_slow: float = 1.0
    mscale: float | None = None
    mscale_all_dim: float | None = None
    attention_factor: float | None = None
    truncate: bool = True
    freq_factors: tuple[float, ...] | None = None  # GGUF `rope_freqs.weight`: inv_freq divisors

    @classmethod
    def from_hf(cls, params: dict | None, default_theta: float) -> RopeConfig:
        """Build from a transformers `rope_parameters` / legacy `rope_scaling` dict."""
        params = dict(params or {})
        rope_type = params.get("rope_type", params.get("type", "default")) or "default"
        if rope_type not in ROPE_TYPES:
            from engine.errors import UnsupportedModelError

            raise UnsupportedModelError(f"RoPE scaling type {rope_type!r} is not supported (have {ROPE_TYPES})")
        omax = params.get("original_max_position_embeddings")
        return cls(
            theta=float(params.get("rope_theta", default_theta)),
            rope_type=rope_type,
            factor=float(params.get("factor", 1.0) or 1.0),
            original_max_position_embeddings=int(omax) if omax else None,
            low_freq_factor=float(params.get("low_freq_factor", 1.0)),
            high_freq_factor=float(params.get("high_freq_factor", 4.0)),
            beta_fast=float(params.get("beta_fast") or 32.0),
            beta_slow=float(params.get("beta_slow") or 1.0),
            mscale=params.get("mscale"),
            mscale_all_dim=params.get("mscale_all_dim"),
            attention_factor=params.get("attention_factor"),
            truncate=bool(params.get("truncate", True)),
        )


def inv_freq_and_scale(
    rope: RopeConfig, head_dim: int, max_positions: int, seq_len: int | None = None
) -> tuple[torch.Tensor, float]:
    """Inverse frequencies (float32, head_dim/2) and the cos/sin multiplier of one layer's RoPE."""
    inv, scale = _inv_freq_and_scale(rope, head_dim, max_positions, seq_len)
    if rope.freq_factors is not None:
        inv = inv / torch.tensor(rope.freq_factors, dtype=torch.float32)
    return inv, scale


def _inv_freq_and_scale(
    rope: RopeConfig, head_dim: int, max_positions: int, seq_len: int | None = None
) -> tuple[torch.Tensor, float]:
    dim = head_dim
    exponents = torch.arange(0, dim, 2, dtype=torch.int64).to(torch.float32) / dim
    base = rope.theta
    omax = rope.original_max_position_embeddings or max_positions
    if rope.rope_type == "default":
        return 1.0 / (base**exponents), 1.0
    if rope.rope_type == "linear":
        return (1.0 / (base**exponents)) / rope.factor, 1.0
    if rope.rope_type == "dynamic":
        n = max(seq_len or max_positions, max_positions)
        base = base * ((rope.factor * n / max_positions) - (rope.factor - 1)) ** (dim / (dim - 2))
        return 1.0 / (base**exponents), 1.0
    if rope.rope_type == "llama3":
        inv = 1.0 / (base**exponents)
        f, lo, hi = rope.factor, rope.low_freq_factor, rope.high_freq_factor
        low_wl, high_wl = omax / lo, omax / hi
        wavelen = 2 * math.pi / inv
        scaled = torch.where(wavelen > low_wl, inv / f, inv)
        smooth = (omax / wavelen - lo) / (hi - lo)
        smoothed = (1 - smooth) * scaled / f + smooth * scaled
        medium = ~(wavelen < high_wl) * ~(wavelen > low_wl)
        return torch.where(medium, smoothed, scaled), 1.0
    if rope.rope_type == "yarn":
        factor = rope.factor

        def mscale_of(scale: float, m: float = 1.0) -> float:
            return 1.0 if scale <= 1 else 0.1 * m * math.log(scale) + 1.0

        attn = rope.attention_factor
        if attn is None:
            if rope.mscale and rope.mscale_all_dim:
                attn = float(mscale_of(factor, rope.mscale) / mscale_of(factor, rope.mscale_all_dim))
            else:
                attn = mscale_of(factor)

        def corr_dim(rot: float) -> float:
            return (dim * math.log(omax / (rot * 2 * math.pi))) / (2 * math.log(base))

        low, high = corr_dim(rope.beta_fast), corr_dim(rope.beta_slow)
        if rope.truncate:
            low, high = math.floor(low), math.ceil(high)
        low, high = max(low, 0), min(high, dim - 1)
        if low == high:
            high += 0.001
        ramp = torch.clamp((torch.arange(dim // 2, dtype=torch.float32) - low) / (high - low), 0, 1)
        pos_freqs = base ** (torch.arange(0, dim, 2).to(torch.float32) / dim)
        extra, inter = 1.0 / pos_freqs, 1.0 / (factor * pos_freqs)
        keep = 1 - ramp
        return inter * (1 - keep) + extra * keep, float(attn)
    raise ValueError(rope.rope_type)


class RotaryEmbedding:
    """cos/sin tables of one RoPE configuration, computed for positions on demand."""

    def __init__(self, rope: RopeConfig, head_dim: int, max_positions: int, device: torch.device) -> None:
        self.rope, self.head_dim, self.max_positions = rope, head_dim, max_positions
        inv, self.scale = inv_freq_and_scale(rope, head_dim, max_positions)
        self.inv_freq = inv.to(device)
        self.dynamic = rope.rope_type == "dynamic"

    def cos_sin(
        self, positions: torch.Tensor, dtype: torch.dtype, seq_lens: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """cos, sin of shape [T, head_dim] for global `positions` [T] (`seq_lens` [T]: dynamic NTK only)."""
        if self.dynamic and seq_lens is not None and bool((seq_lens > self.max_positions).any()):
            inv = torch.stack(
                [
                    inv_freq_and_scale(self.rope, self.head_dim, self.max_positions, int(n))[0]
                    for n in seq_lens.tolist()
                ]
            ).to(positions.device)
            freqs = positions[:, None].float() * inv
        else:
            freqs = positions[:, None].float() * self.inv_freq[None, :]
        emb = torch.cat((freqs, freqs), dim=-1)
        return (emb.cos() * self.scale).to(dtype), (emb.sin() * self.scale).to(dtype)


_SIGNED: dict[int, tuple[torch.Tensor, ...]] = {}
_CACHE_ROWS = 64


def apply_rope_rolled(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """`apply_rope` in four operations instead of nine, equal to it bit for bit: rotate_half(x) * sin
    = roll(x, half) * [-sin_lo, sin_hi] (a negation is exact either side of the product). The
    broadcast cos and the signed sin are made once per (cos, sin) pair of a forward, which every layer
    of that RoPE shares (a CPU decode step rotates q and k of 18 layers: 30 -> 8 us a layer)."""
    hit = _SIGNED.get(id(sin))
    if hit is None or hit[0] is not sin or hit[1] is not cos:
        half = sin.shape[-1] // 2
        hit = (sin, cos, cos[:, None, :], torch.cat((-sin[:, :half], sin[:, half:]), dim=-1)[:, None, :])
        if sin.shape[0] <= _CACHE_ROWS:  # decode steps; a prefill chunk's tables are not kept
            if len(_SIGNED) >= 8:
                _SIGNED.clear()
            _SIGNED[id(sin)] = hit  # holds sin and cos themselves, so their ids cannot be reused while cached
    _, _, cos3, signed = hit
    return x * cos3 + torch.roll(x, x.shape[-1] // 2, dims=-1) * signed


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate x [T, heads, head_dim] by cos/sin [T, head_dim] (rotate-half convention)."""
    cos, sin = cos[:, None, :], sin[:, None, :]
    half = x.shape[-1] // 2
    rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return x * cos + rotated * sin
