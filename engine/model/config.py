"""The engine's model configuration: one plain dataclass that every family fills in.

Family modules (`engine.model.families.*`) translate a Hugging Face `config.json` dict or GGUF metadata into
a `ModelConfig`; the shared layers (`engine.model.layers`) read nothing else.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from engine.model.rope import RopeConfig


@dataclass
class ModelConfig:
    """Shape and numerics of a decoder-only transformer, per layer where layers differ."""

    architecture: str  # family key: "gemma3", "llama", "qwen2", "qwen3"
    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    rms_norm_eps: float
    max_position_embeddings: int
    layer_windows: list[int | None]  # sliding window per layer (None = global attention)
    layer_ropes: list[RopeConfig]
    attn_scale: float
    tie_word_embeddings: bool = True
    attention_bias: bool = False
    qk_norm: bool = False
    sandwich_norms: bool = False  # Gemma: norms after attention and after the MLP as well
    gemma_norm: bool = False  # RMSNorm as x * (1 + w), computed in float32, cast after the product
    embed_scale: float | None = None  # Gemma: embeddings multiplied by sqrt(hidden_size)
    hidden_act: str = "silu"  # "silu" or "gelu_tanh"
    attn_softcap: float | None = None
    final_softcap: float | None = None
    bos_token_id: int | None = None
    eos_token_ids: list[int] = field(default_factory=list)
    pad_token_id: int | None = None
    name: str = ""

    @property
    def global_layers(self) -> list[int]:
        return [i for i, w in enumerate(self.layer_windows) if w is None]

    @property
    def sliding_layers(self) -> list[int]:
        return [i for i, w in enumerate(self.layer_windows) if w is not None]


def eos_list(value: int | list[int] | None) -> list[int]:
    """Normalise an `eos_token_id` field (int, list or None) to a list."""
    if value is None:
        return []
    if isinstance(value, int):
        return [value]
    return [int(v) for v in value]
