"""Llama 2/3.x and Mistral: pre-norm decoder, SiLU-gated MLP, grouped-query attention, RoPE with
optional linear / dynamic / YaRN / llama3 scaling.

GGUF notes: llama.cpp permutes the rows of attn_q / attn_k for its interleaved RoPE; we undo that.
Llama 3.1 files carry the llama3 scaling as a `rope_freqs.weight` tensor of per-frequency divisors.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from engine.model.config import ModelConfig, eos_list
from engine.model.families.common import (
    gguf_dims,
    gguf_rope,
    gguf_special_ids,
    gguf_to_hf_name,
    hf_rope,
    need,
)


def hf_dims(cfg: dict[str, Any], where: str) -> dict[str, Any]:
    heads = int(need(cfg, "num_attention_heads", where))
    hidden = int(need(cfg, "hidden_size", where))
    return {
        "vocab_size": int(need(cfg, "vocab_size", where)),
        "hidden_size": hidden,
        "intermediate_size": int(need(cfg, "intermediate_size", where)),
        "num_layers": int(need(cfg, "num_hidden_layers", where)),
        "num_heads": heads,
        "num_kv_heads": int(cfg.get("num_key_value_heads") or heads),
        "head_dim": int(cfg.get("head_dim") or hidden // heads),
        "rms_norm_eps": float(cfg.get("rms_norm_eps", 1e-6)),
        "max_position_embeddings": int(cfg.get("max_position_embeddings", 4096)),
    }


def hf_common(cfg: dict[str, Any], architecture: str, dims: dict[str, Any], **flags: Any) -> ModelConfig:
    n = dims["num_layers"]
    rope = hf_rope(cfg, None, 10000.0)
    # Mistral applies `sliding_window` (when set) to every layer; Qwen only with use_sliding_window.
    window = cfg.get("sliding_window") if cfg.get("use_sliding_window", cfg.get("model_type") == "mistral") else None
    layer_types = cfg.get("layer_types")
    if window and layer_types:
        windows: list[int | None] = [int(window) if t == "sliding_attention" else None for t in layer_types]
    else:
        windows = [int(window) if window else None] * n
    return ModelConfig(
        architecture=architecture,
        layer_windows=windows,
        layer_ropes=[rope] * n,
        attn_scale=dims["head_dim"] ** -0.5,
        tie_word_embeddings=bool(cfg.get("tie_word_embeddings", False)),
        bos_token_id=cfg.get("bos_token_id"),
        eos_token_ids=eos_list(cfg.get("eos_token_id")),
        pad_token_id=cfg.get("pad_token_id"),
        **dims,
        **flags,
    )


def from_hf(cfg: dict[str, Any]) -> ModelConfig:
    model_type = cfg.get("model_type", "llama")
    dims = hf_dims(cfg, f"config.json ({model_type})")
    return hf_common(cfg, "llama", dims, attention_bias=bool(cfg.get("attention_bias", False)))


def gguf_common(meta: dict[str, Any], arch: str, n_vocab: int | None, tensor_names: set[str], **flags: Any) -> ModelConfig:
    dims = gguf_dims(meta, arch, n_vocab)
    rope = gguf_rope(meta, arch)
    n = dims["num_layers"]
    window = meta.get(f"{arch}.attention.sliding_window")
    return ModelConfig(
        architecture=arch,
        layer_windows=[int(window) if window else None] * n,
        layer_ropes=[rope] * n,
        attn_scale=dims["head_dim"] ** -0.5,
        tie_word_embeddings="output.weight" not in tensor_names,
        name=str(meta.get("general.name", "")),
        **dims,
        **gguf_special_ids(meta),
        **flags,
    )


def from_gguf(meta: dict[str, Any], n_vocab: int | None, tensor_names: set[str]) -> ModelConfig:
    return gguf_common(meta, "llama", n_vocab, tensor_names, attention_bias="blk.0.attn_q.bias" in tensor_names)


def gguf_tensor_name(name: str) -> str | None:
    return gguf_to_hf_name(name)


def unpermute_qk(w: np.ndarray, n_head: int) -> np.ndarray:
    """Undo llama.cpp's row permutation of a q/k projection (or bias) for `n_head` heads."""
    shape = w.shape
    return w.reshape(n_head, shape[0] // n_head // 2, 2, *shape[1:]).swapaxes(1, 2).reshape(shape)


def fix_gguf_tensor(hf_name: str, array: np.ndarray, config: ModelConfig) -> np.ndarray:
    if ".q_proj." in hf_name:
        return unpermute_qk(array, config.num_heads)
    if ".k_proj." in hf_name:
        return unpermute_qk(array, config.num_kv_heads)
    return array
