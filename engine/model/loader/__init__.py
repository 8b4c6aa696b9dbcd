"""Loading models without pickle: GGUF files (dequantised with `gguf`) and local Hugging Face folders.

`load_model(path, device, dtype)` returns the model (weights on `device` in `dtype`), its
`ModelConfig` and its tokenizer (None if the source has none). `has_chat_template(path)` reads only
the metadata, so a caller can check before paying for the weights.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import torch

from engine.errors import ModelLoadError
from engine.model.config import ModelConfig
from engine.model.decoder import CausalLM
from engine.model.tokenizer import Tokenizer


def build_model(config: ModelConfig, weights: dict[str, torch.Tensor], device: torch.device) -> CausalLM:
    """Instantiate the model on the meta device and assign `weights` (HF names); name what is missing."""
    with torch.device("meta"):
        model = CausalLM(config)
    expected = dict(model.named_parameters())
    missing = [n for n in expected if n not in weights]
    if missing:
        raise ModelLoadError(f"missing tensor {missing[0]!r}" + (f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""))
    for name, param in expected.items():
        w = weights[name]
        if tuple(w.shape) != tuple(param.shape):
            raise ModelLoadError(f"tensor {name!r} has shape {tuple(w.shape)}, expected {tuple(param.shape)}")
    model.load_state_dict({n: weights[n].to(device) for n in expected}, strict=False, assign=True)
    for p in model.parameters():
        p.requires_grad_(False)
    model.eval()
    model.setup_rope(device)
    from engine.model.layers import MLP, Attention, RMSNorm

    for m in model.modules():
        if isinstance(m, RMSNorm):
            m.prepare()
        elif isinstance(m, (Attention, MLP)):
            m.fuse()  # one q/k/v and one gate/up matmul per layer (same results, fewer calls)
    return model


def load_model(
    path: str | Path, device: torch.device, dtype: torch.dtype, weights: str = "float",
    shard: Callable[[ModelConfig, dict[str, torch.Tensor]], tuple[ModelConfig, dict[str, torch.Tensor]]] | None = None,
) -> tuple[CausalLM, ModelConfig, Tokenizer | None]:
    """weights: "float" (every weight in `dtype`) or "int8" (CPU: weight-only int8 linears, output
    layer and embedding table, engine/model/quant.py; the float weights are read, then requantised
    per output row). shard: (full config, tensors) -> (this rank's config, its tensors), applied
    before the model is built (tensor parallelism, engine/parallel); the model then has the rank's
    config and the returned config is still the full model's."""
    path = Path(path).expanduser()
    if path.is_dir():
        from engine.model.loader.hf_folder import load_hf_folder

        config, tensors, tok = load_hf_folder(path, dtype)
    elif path.is_file():
        from engine.model.loader.gguf_model import load_gguf

        config, tensors, tok = load_gguf(path, dtype)
    else:
        raise ModelLoadError(f"model not found: {path}")
    model_config = config
    if shard is not None:
        model_config, tensors = shard(config, tensors)
    model = build_model(model_config, tensors, device)
    del tensors
    if device.type == "cpu":
        # the C kernels of the CPU decode step (longdoc_kernels/cpu), built here rather than inside
        # the first request that needs them (~1 s with an empty cache, once per machine and compiler)
        from longdoc_kernels.cpu import lib as cpu_kernels

        cpu_kernels()
    if weights == "int8":
        if device.type != "cpu":
            raise ModelLoadError("weights='int8' runs on the CPU only (torch._weight_int8pack_mm)")
        from engine.model.quant import quantize_model

        quantize_model(model)
    elif weights != "float":
        raise ModelLoadError(f"weights must be 'float' or 'int8', not {weights!r}")
    return model, config, tok


def has_chat_template(path: str | Path | None = None) -> bool:
    """Whether the model at `path` (a GGUF file or an HF folder; None: the packaged default) has a
    chat template, from its metadata alone, no weights read: a GGUF's `tokenizer.chat_template`
    (header parse, well under a second for Gemma 3's vocabulary), a folder's chat_template.jinja or
    the `chat_template` string of its tokenizer_config.json. Raises ModelLoadError when the model
    cannot be found or read."""
    if path is None:
        from engine.paths import default_model_path

        path = default_model_path()
    path = Path(path).expanduser()
    if path.is_dir():
        if (path / "chat_template.jinja").is_file():
            return True
        tc = path / "tokenizer_config.json"
        if not tc.is_file():
            return False
        try:
            conf = json.loads(tc.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ModelLoadError(f"{tc}: cannot be read ({exc})") from exc
        return isinstance(conf, dict) and isinstance(conf.get("chat_template"), str) and bool(conf["chat_template"])
    if path.is_file():
        from engine.model.loader.gguf_file import read_gguf

        template = read_gguf(path).get("tokenizer.chat_template")
        return isinstance(template, str) and bool(template)
    raise ModelLoadError(f"model not found: {path}")
