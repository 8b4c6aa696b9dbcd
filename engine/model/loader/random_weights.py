"""Random-weight models built straight from a config, for GPU benchmarks and tests.

An 8B-parameter model saved to disk is 16 GB and loads slowly; benchmarks and correctness tests
need only the shapes and sane activations. `random_model` draws every weight on the target device
(linear and embedding weights ~ N(0, std), biases 0, norm weights at their neutral value: 1 for
Llama-style RMSNorm, 0 for Gemma's x * (1 + w)), then assembles the model exactly as a loaded one
(`engine.model.loader.build_model`: fused q/k/v and gate/up). `llm_from_model` wraps an in-memory model
in a full `LLM` (KV cache, scheduler, backend, CUDA graphs) without touching the disk.

`hf_to_engine_config` turns a transformers config object (or its dict) into the engine's
`ModelConfig`, the same translation a local HF folder goes through.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from engine.model.config import ModelConfig
from engine.model.families import family_for_hf

if TYPE_CHECKING:
    from engine.llm import LLM
    from engine.model.decoder import CausalLM
    from engine.model.tokenizer import Tokenizer


def hf_to_engine_config(hf_config: Any) -> ModelConfig:
    """ModelConfig from a transformers config (object with `to_dict`, or a config.json dict)."""
    cfg = hf_config.to_dict() if hasattr(hf_config, "to_dict") else dict(hf_config)
    return family_for_hf(cfg["model_type"]).from_hf(cfg)


def random_weights(
    config: ModelConfig, device: torch.device | str, dtype: torch.dtype, seed: int = 0, std: float = 0.02
) -> dict[str, torch.Tensor]:
    """A full state dict (HF names) of random weights for `config`, drawn on `device`."""
    from engine.model.decoder import CausalLM

    with torch.device("meta"):
        shapes = {n: tuple(p.shape) for n, p in CausalLM(config).named_parameters()}
    gen = torch.Generator(device=device).manual_seed(seed)
    out: dict[str, torch.Tensor] = {}
    for name, shape in shapes.items():
        if name.endswith("norm.weight"):
            t = torch.full(shape, 0.0 if config.gemma_norm else 1.0, dtype=dtype, device=device)
        elif name.endswith(".bias"):
            t = torch.zeros(shape, dtype=dtype, device=device)
        else:
            t = torch.empty(shape, dtype=dtype, device=device)
            t.normal_(0.0, std, generator=gen)
        out[name] = t
    return out


def random_model(
    config: ModelConfig, device: torch.device | str, dtype: torch.dtype, seed: int = 0, std: float = 0.02
) -> CausalLM:
    """The engine model of `config` with random weights on `device`, ready to run."""
    from engine.model.loader import build_model

    weights = random_weights(config, device, dtype, seed, std)
    model = build_model(config, weights, torch.device(device))
    del weights
    return model


@contextmanager
def _preloaded(model: CausalLM, config: ModelConfig, tokenizer: Tokenizer | None) -> Iterator[None]:
    import engine.model.loader as loader

    saved = loader.load_model
    loader.load_model = lambda path, device, dtype, weights="float": (model, config, tokenizer)
    try:
        yield
    finally:
        loader.load_model = saved


def llm_from_model(
    model: CausalLM, config: ModelConfig, tokenizer: Tokenizer | None = None, **llm_kwargs: Any
) -> LLM:
    """An `LLM` around an in-memory model (device and dtype must match the model's weights);
    `llm_kwargs` are LLM's own (device, dtype, cache, backend, cuda_graphs, ...). Runs the real
    `LLM.__init__`, with the loading step answered by `model`."""
    import tempfile
    import uuid
    import weakref

    from engine.llm import LLM

    # A small stand-in file gives the LLM a model path (its prefix-cache fingerprint hashes the
    # weight file): unique per call, so two in-memory models never share cached prefixes.
    marker = Path(tempfile.gettempdir()) / f"longdoc-in-memory-{uuid.uuid4().hex}.model"
    marker.write_text(f"in-memory model {config.name or config.architecture} {uuid.uuid4().hex}\n")
    try:
        with _preloaded(model, config, tokenizer):
            llm = LLM(model=marker, **llm_kwargs)
    except BaseException:
        marker.unlink(missing_ok=True)
        raise
    weakref.finalize(llm, marker.unlink, missing_ok=True)  # gone with the LLM, or at exit
    return llm
