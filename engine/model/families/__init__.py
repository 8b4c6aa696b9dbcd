"""Model families: each module turns a config (HF dict or GGUF metadata) into a `ModelConfig` and
names its GGUF tensors; all of them run on the shared decoder in `engine.model.decoder`."""

from __future__ import annotations

from types import ModuleType

from engine.errors import UnsupportedModelError
from engine.model.families import gemma3, llama, qwen2, qwen3

# HF `model_type` -> family module.
HF_MODEL_TYPES: dict[str, ModuleType] = {
    "gemma3_text": gemma3,
    "gemma3": gemma3,
    "llama": llama,
    "mistral": llama,
    "qwen2": qwen2,
    "qwen3": qwen3,
}
# GGUF `general.architecture` -> family module.
GGUF_ARCHITECTURES: dict[str, ModuleType] = {"gemma3": gemma3, "llama": llama, "qwen2": qwen2, "qwen3": qwen3}


def family_for_hf(model_type: str) -> ModuleType:
    try:
        return HF_MODEL_TYPES[model_type]
    except KeyError:
        raise UnsupportedModelError(
            f"unknown architecture {model_type!r} (supported: {', '.join(sorted(HF_MODEL_TYPES))})"
        ) from None


def family_for_gguf(arch: str) -> ModuleType:
    try:
        return GGUF_ARCHITECTURES[arch]
    except KeyError:
        raise UnsupportedModelError(
            f"unknown GGUF architecture {arch!r} (supported: {', '.join(sorted(GGUF_ARCHITECTURES))})"
        ) from None
