"""Qwen2 / Qwen2.5: the Llama layout with a bias on the q/k/v projections (NEOX RoPE in llama.cpp,
so GGUF q/k rows are not permuted)."""

from __future__ import annotations

from typing import Any

import numpy as np

from engine.model.config import ModelConfig
from engine.model.families.common import gguf_to_hf_name
from engine.model.families.llama import gguf_common, hf_common, hf_dims


def from_hf(cfg: dict[str, Any]) -> ModelConfig:
    dims = hf_dims(cfg, "config.json (qwen2)")
    cfg = {**cfg, "use_sliding_window": bool(cfg.get("use_sliding_window", False))}
    return hf_common(cfg, "qwen2", dims, attention_bias=True)


def from_gguf(meta: dict[str, Any], n_vocab: int | None, tensor_names: set[str]) -> ModelConfig:
    return gguf_common(meta, "qwen2", n_vocab, tensor_names, attention_bias=True)


def gguf_tensor_name(name: str) -> str | None:
    return gguf_to_hf_name(name)


def fix_gguf_tensor(hf_name: str, array: np.ndarray, config: ModelConfig) -> np.ndarray:
    return array
