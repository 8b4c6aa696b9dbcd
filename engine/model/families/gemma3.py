"""Gemma 3 (text): interleaved sliding-window and global layers with their own RoPE bases, q/k
RMSNorm, sandwich norms (after attention and after the MLP as well), RMSNorm as x * (1 + w),
embeddings scaled by sqrt(hidden_size), attention scaled by query_pre_attn_scalar ** -0.5,
GELU (tanh) MLP.

GGUF notes: llama.cpp stores every Gemma norm weight as 1 + w (we subtract 1); the file does not
store the local RoPE base, the layer pattern or the query scalar, so Gemma 3's published defaults
fill them in (10000, 5 sliding : 1 global, head_dim).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from engine.model.config import ModelConfig, eos_list
from engine.model.families.common import (
    GGUF_BLOCK_NAMES,
    gguf_dims,
    gguf_rope,
    gguf_special_ids,
    gguf_to_hf_name,
    hf_rope,
    need,
)
from engine.model.rope import RopeConfig

SLIDING_PATTERN = 6  # every 6th layer is global
LOCAL_ROPE_THETA = 10000.0

GGUF_NAMES = dict(
    GGUF_BLOCK_NAMES,
    **{
        "ffn_norm.weight": "pre_feedforward_layernorm.weight",
        "post_attention_norm.weight": "post_attention_layernorm.weight",
        "post_ffw_norm.weight": "post_feedforward_layernorm.weight",
    },
)


def _layer_types(n: int, pattern: int = SLIDING_PATTERN) -> list[str]:
    return ["full_attention" if (i + 1) % pattern == 0 else "sliding_attention" for i in range(n)]


def _build(
    dims: dict[str, Any],
    layer_types: list[str],
    window: int,
    global_rope: RopeConfig,
    local_rope: RopeConfig,
    query_scalar: float,
    **extra: Any,
) -> ModelConfig:
    windows: list[int | None] = [window if t == "sliding_attention" else None for t in layer_types]
    ropes = [local_rope if t == "sliding_attention" else global_rope for t in layer_types]
    return ModelConfig(
        architecture="gemma3",
        layer_windows=windows,
        layer_ropes=ropes,
        attn_scale=float(query_scalar) ** -0.5,
        qk_norm=True,
        sandwich_norms=True,
        gemma_norm=True,
        embed_scale=float(dims["hidden_size"]) ** 0.5,
        hidden_act="gelu_tanh",
        **dims,
        **extra,
    )


def from_hf(cfg: dict[str, Any]) -> ModelConfig:
    """ModelConfig from a Gemma 3 `config.json` (text config, or the multimodal one's `text_config`)."""
    if "text_config" in cfg and cfg.get("model_type") == "gemma3":
        cfg = {**cfg["text_config"], **{k: cfg[k] for k in ("eos_token_id", "bos_token_id") if k in cfg}}
    w = "config.json (gemma3)"
    n = int(need(cfg, "num_hidden_layers", w))
    layer_types = cfg.get("layer_types") or _layer_types(n, int(cfg.get("sliding_window_pattern", SLIDING_PATTERN)))
    head_dim = int(cfg.get("head_dim", 256))
    dims = {
        "vocab_size": int(need(cfg, "vocab_size", w)),
        "hidden_size": int(need(cfg, "hidden_size", w)),
        "intermediate_size": int(need(cfg, "intermediate_size", w)),
        "num_layers": n,
        "num_heads": int(need(cfg, "num_attention_heads", w)),
        "num_kv_heads": int(cfg.get("num_key_value_heads", 1)),
        "head_dim": head_dim,
        "rms_norm_eps": float(cfg.get("rms_norm_eps", 1e-6)),
        "max_position_embeddings": int(cfg.get("max_position_embeddings", 131072)),
    }
    params = cfg.get("rope_parameters")
    if isinstance(params, dict) and "full_attention" in params:
        global_rope = hf_rope(cfg, "full_attention", 1_000_000.0)
        local_rope = hf_rope(cfg, "sliding_attention", LOCAL_ROPE_THETA)
    else:
        global_rope = hf_rope(cfg, None, 1_000_000.0)
        local_rope = RopeConfig(theta=float(cfg.get("rope_local_base_freq", LOCAL_ROPE_THETA)))
    return _build(
        dims,
        list(layer_types),
        int(cfg.get("sliding_window", 4096)),
        global_rope,
        local_rope,
        float(cfg.get("query_pre_attn_scalar", head_dim)),
        tie_word_embeddings=bool(cfg.get("tie_word_embeddings", True)),
        attention_bias=bool(cfg.get("attention_bias", False)),
        attn_softcap=cfg.get("attn_logit_softcapping"),
        final_softcap=cfg.get("final_logit_softcapping"),
        bos_token_id=cfg.get("bos_token_id", 2),
        eos_token_ids=eos_list(cfg.get("eos_token_id", 1)),
        pad_token_id=cfg.get("pad_token_id", 0),
    )


def from_gguf(meta: dict[str, Any], n_vocab: int | None, tensor_names: set[str]) -> ModelConfig:
    """ModelConfig from GGUF metadata, with Gemma 3's published defaults for what GGUF omits."""
    arch = "gemma3"
    dims = gguf_dims(meta, arch, n_vocab)
    return _build(
        dims,
        _layer_types(dims["num_layers"]),
        int(meta.get(f"{arch}.attention.sliding_window", 4096)),
        gguf_rope(meta, arch, 1_000_000.0),
        RopeConfig(theta=LOCAL_ROPE_THETA),
        float(dims["head_dim"]),  # query_pre_attn_scalar: 256 for the 270M/1B/4B/12B models
        tie_word_embeddings="output.weight" not in tensor_names,
        name=str(meta.get("general.name", "")),
        **gguf_special_ids(meta),
    )


def gguf_tensor_name(name: str) -> str | None:
    return gguf_to_hf_name(name, GGUF_NAMES)


def fix_gguf_tensor(hf_name: str, array: np.ndarray, config: ModelConfig) -> np.ndarray:
    """llama.cpp stores Gemma norm weights as 1 + w."""
    if hf_name.endswith("norm.weight"):
        return array - 1.0
    return array
