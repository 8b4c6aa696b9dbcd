"""Sanity checks of a model's configuration before anything is built from it.

A config (HF `config.json` or GGUF metadata) is only numbers someone wrote: a million layers once
built on the meta device for 150 s and 2.6 GB before the first tensor was compared. `check_config`
bounds every shape field to what real decoders use (with wide margins) and compares the parameters
the config implies with those the weight files actually hold (read from their headers, nothing
loaded), so a config that asks for clearly more than the files contain (over 1.25x) fails in milliseconds with one line.
"""

from __future__ import annotations

import math

from engine.errors import ModelLoadError
from engine.model.config import ModelConfig

# Generous bounds: the largest public decoders have 126 layers, hidden 16,384, 128 heads,
# head_dim 256, a 262,144-token vocabulary and an MLP of 53,248.
LIMITS = {
    "num_layers": 1024,
    "hidden_size": 1 << 17,
    "intermediate_size": 1 << 20,
    "num_heads": 1024,
    "num_kv_heads": 1024,
    "head_dim": 1024,
    "vocab_size": 1 << 22,
    "max_position_embeddings": 1 << 27,
}


def estimated_parameters(c: ModelConfig) -> int:
    """Weights of the matrices every layer needs (embedding, attention, MLP, LM head unless tied):
    a lower bound of what the weight files must hold (norms and biases left out)."""
    attn = c.hidden_size * c.head_dim * (2 * c.num_heads + 2 * c.num_kv_heads)
    mlp = 3 * c.hidden_size * c.intermediate_size
    embed = c.vocab_size * c.hidden_size
    return embed * (1 if c.tie_word_embeddings else 2) + c.num_layers * (attn + mlp)


def check_config(c: ModelConfig, present_parameters: int | None, where: str) -> None:
    """Raise ModelLoadError (one line, starting with `where`) when `c` is out of bounds, inconsistent,
    or implies more parameters than the weight files hold (`present_parameters`; None: unknown)."""
    for name, top in LIMITS.items():
        v = getattr(c, name)
        if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= top:
            raise ModelLoadError(f"{where}: {name} {v!r} is out of range (1 to {top:,})")
    if c.num_heads % c.num_kv_heads:
        raise ModelLoadError(
            f"{where}: {c.num_heads} attention heads are not a multiple of {c.num_kv_heads} key/value heads"
        )
    if len(c.layer_windows) != c.num_layers or len(c.layer_ropes) != c.num_layers:
        raise ModelLoadError(
            f"{where}: {c.num_layers} layers but {len(c.layer_windows)} layer types / {len(c.layer_ropes)} RoPE settings"
        )
    bad_window = next((w for w in c.layer_windows if w is not None and not 1 <= w <= LIMITS["max_position_embeddings"]), None)
    if bad_window is not None:
        raise ModelLoadError(f"{where}: sliding window {bad_window!r} is out of range")
    _check_numbers(c, where)
    if present_parameters is not None:
        need = estimated_parameters(c)
        # a margin: a file missing a tensor or two is better told by name (build_model does it)
        if need > present_parameters * 1.25:
            raise ModelLoadError(
                f"{where}: the config describes at least {need:,} parameters ({c.num_layers:,} layers, "
                f"hidden_size {c.hidden_size:,}, vocab_size {c.vocab_size:,}) but the weights hold "
                f"{present_parameters:,}"
            )


def _finite(v) -> bool:
    return not isinstance(v, bool) and isinstance(v, (int, float)) and math.isfinite(v)


def _check_numbers(c: ModelConfig, where: str) -> None:
    """The scalars a forward pass divides by, exponentiates or indexes with: RoPE bases and factors
    (a base of 0 once gave NaN logits and an empty answer, exit 0), the norm epsilon, the attention
    scale and soft-caps, and the special token ids (one past the vocabulary once was an IndexError)."""
    if not (_finite(c.rms_norm_eps) and 0 < c.rms_norm_eps < 1):
        raise ModelLoadError(f"{where}: rms_norm_eps {c.rms_norm_eps!r} is out of range (0 to 1, exclusive)")
    if not (_finite(c.attn_scale) and 0 < c.attn_scale <= 16):
        raise ModelLoadError(f"{where}: attention scale {c.attn_scale!r} is out of range (0 to 16)")
    for name in ("attn_softcap", "final_softcap", "embed_scale"):
        v = getattr(c, name)
        if v is not None and not (_finite(v) and v > 0):
            raise ModelLoadError(f"{where}: {name} {v!r} must be a positive number")
    for i, r in enumerate(c.layer_ropes):
        if not (_finite(r.theta) and r.theta > 1):
            raise ModelLoadError(f"{where}: layer {i} RoPE base (rope.freq_base) {r.theta!r} must be a number above 1")
        for name in ("factor", "low_freq_factor", "high_freq_factor", "beta_fast", "beta_slow"):
            v = getattr(r, name)
            if not (_finite(v) and v > 0):
                raise ModelLoadError(f"{where}: layer {i} RoPE {name} {v!r} must be a positive number")
        if r.freq_factors is not None and not all(_finite(x) and x > 0 for x in r.freq_factors):
            raise ModelLoadError(f"{where}: layer {i} RoPE frequency factors must be positive numbers")
    ids = [("bos_token_id", c.bos_token_id), ("pad_token_id", c.pad_token_id)]
    ids += [("eos_token_id", e) for e in c.eos_token_ids]
    for name, v in ids:
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or not 0 <= v < c.vocab_size):
            raise ModelLoadError(f"{where}: {name} {v!r} is outside the vocabulary (0 to {c.vocab_size - 1:,})")


def largest_tensor(c: ModelConfig) -> int:
    """The most elements any one weight of this config holds (the embedding, a projection or an MLP
    matrix): a tensor of a file past it is not this model's, whatever its name."""
    return max(c.vocab_size * c.hidden_size, c.hidden_size * c.intermediate_size,
               c.hidden_size * c.head_dim * max(c.num_heads, c.num_kv_heads))


def check_tensor_sizes(c: ModelConfig, sizes: dict[str, int], where: str) -> None:
    """Raise ModelLoadError naming the first tensor with more elements than `largest_tensor` (a
    sparse file declaring a 25 GB tensor once made a 25 GiB allocation before anything failed)."""
    top = largest_tensor(c)
    for name, n in sizes.items():
        if n > top:
            raise ModelLoadError(f"{where}: tensor {name!r} holds {n:,} elements, more than any weight of this "
                                 f"model ({top:,}): not this model's, or a forged file")
