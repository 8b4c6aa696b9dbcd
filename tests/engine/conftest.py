"""Fixtures for the engine tests: tiny random-weight transformers models of every family (saved as
HF folders with safetensors) and, once per session, the real default model."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from tests.engine.tiny_models import FAMILIES, tiny_hf_model


@pytest.fixture(scope="session")
def tiny_folders(tmp_path_factory) -> dict[str, tuple[Path, torch.nn.Module]]:
    """family -> (HF folder with safetensors weights, the transformers model)."""
    out = {}
    for fam in FAMILIES:
        model = tiny_hf_model(fam)
        folder = tmp_path_factory.mktemp(f"tiny-{fam}")
        model.save_pretrained(folder, safe_serialization=True)
        out[fam] = (folder, model)
    return out


@pytest.fixture(scope="session")
def gemma_llm():
    """The real default model (Gemma 3 270M GGUF), float32 on CPU with float32 K/V pages (its tests
    hold it to transformers' float32 logits), loaded once per session."""
    from engine import LLM, CacheConfig

    return LLM(device="cpu", dtype="float32", cache=CacheConfig(memory_budget=256 * 2**20, kv_dtype="float32"),
               max_model_len=4096)


@pytest.fixture(autouse=True)
def _one_torch_thread():
    """Engine tests run torch on one thread: on the shared 2-core CI machine, OpenMP's second thread
    turns every small op into a ~10 ms wait when the other core is busy. Restored after each test."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)
