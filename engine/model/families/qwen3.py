"""Qwen3 (dense): the Llama layout with RMSNorm on queries and keys per head (before RoPE), no
q/k/v bias, explicit head_dim."""

from __future__ import annotations

from typing import Any

import numpy as np

from engine.model.config import ModelConfig
from engine.model.families.common import gguf_to_hf_name
from engine.model.families.llama import gguf_common, hf_common, hf_dims


def from_hf(cfg: dict[str, Any]) -> ModelConfig:
    dims = hf_dims(cfg, "config.json (qwen3)")
    cfg = {**cfg, "use_sliding_window": bool(cfg.get("use_sliding_window", False))}
    return hf_common(cfg, "qwen3", dims, attention_bias=bool(cfg.get("attention_bias", False)), qk_norm=True)


def from_gguf(meta: dict[str, Any], n_vocab: int | None, tensor_names: set[str]) -> ModelConfig:
    return gguf_common(meta, "qwen3", n_vocab, tensor_names, qk_norm=True)


def gguf_tensor_name(name: str) -> str | None:
    return gguf_to_hf_name(name)


def fix_gguf_tensor(hf_name: str, array: np.ndarray, config: ModelConfig) -> np.ndarray:
    return array
