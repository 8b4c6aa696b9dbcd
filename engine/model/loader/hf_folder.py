"""Loading a model from a local Hugging Face folder: config.json, *.safetensors (one file or an
index of shards), tokenizer.json (+ tokenizer_config.json / chat_template.jinja). No pickle: a
folder with only pytorch_model.bin is refused."""

from __future__ import annotations

import json
from pathlib import Path

import torch

from engine.errors import ModelLoadError
from engine.model.config import ModelConfig
from engine.model.families import family_for_hf
from engine.model.tokenizer import Tokenizer

_PREFIXES = ("model.language_model.", "language_model.model.", "language_model.")


def hf_config(folder: Path) -> ModelConfig:
    path = folder / "config.json"
    if not path.is_file():
        raise ModelLoadError(f"{folder}: no config.json")
    try:
        cfg = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise ModelLoadError(f"{path}: not valid JSON ({exc})") from exc
    if not isinstance(cfg, dict):
        raise ModelLoadError(f"{path}: not a JSON object")
    model_type = cfg.get("model_type")
    if model_type is None:
        raise ModelLoadError(f"{path}: no model_type")
    family = family_for_hf(model_type)
    try:
        return family.from_hf(cfg)
    except (TypeError, ValueError, ZeroDivisionError, KeyError, AttributeError, OverflowError) as exc:
        raise ModelLoadError(f"{path}: invalid config ({type(exc).__name__}: {exc})") from None


def _rename(name: str) -> str:
    for p in _PREFIXES:
        if name.startswith(p):
            rest = name[len(p) :]
            return rest if rest.startswith(("model.", "lm_head.")) else "model." + rest
    return name


def hf_state_dict(folder: Path, dtype: torch.dtype) -> dict[str, torch.Tensor]:
    from safetensors import SafetensorError, safe_open

    files = sorted(folder.glob("*.safetensors"))
    if not files:
        if any(folder.glob("*.bin")) or any(folder.glob("*.pt")):
            raise ModelLoadError(f"{folder}: only pickle weights (*.bin/*.pt); convert them to safetensors")
        raise ModelLoadError(f"{folder}: no *.safetensors weights")
    out: dict[str, torch.Tensor] = {}
    for fp in files:
        try:
            with safe_open(str(fp), framework="pt") as fh:
                for key in fh.keys():
                    if "vision" in key or "multi_modal" in key:
                        continue
                    out[_rename(key)] = fh.get_tensor(key).to(dtype)
        except (SafetensorError, OSError, ValueError) as exc:
            raise ModelLoadError(f"{fp.name}: corrupt or truncated safetensors file ({exc})") from exc
    return out


def hf_tokenizer(folder: Path) -> Tokenizer | None:
    from tokenizers import Tokenizer as FastTokenizer

    tj = folder / "tokenizer.json"
    if not tj.is_file():
        return None
    try:
        fast = FastTokenizer.from_file(str(tj))
    except Exception as exc:
        raise ModelLoadError(f"{tj}: cannot be read ({exc})") from exc
    conf: dict = {}
    tc = folder / "tokenizer_config.json"
    if tc.is_file():
        conf = json.loads(tc.read_text())
    template = conf.get("chat_template")
    jinja = folder / "chat_template.jinja"
    if jinja.is_file():
        template = jinja.read_text()

    def token_str(v: object) -> str | None:
        if isinstance(v, dict):
            return v.get("content")
        return v if isinstance(v, str) else None

    special = {i for t, i in fast.get_vocab(with_added_tokens=True).items() if t in {
        a.content for a in fast.get_added_tokens_decoder().values() if a.special
    }}
    return Tokenizer(
        fast,
        bos_token=token_str(conf.get("bos_token")),
        eos_token=token_str(conf.get("eos_token")),
        chat_template=template if isinstance(template, str) else None,
        special_ids=special,
    )


def hf_parameter_count(folder: Path) -> int:
    """Elements of the language-model tensors in the folder's safetensors files, from their headers
    only (nothing is read beyond them)."""
    from safetensors import SafetensorError, safe_open

    total = 0
    for fp in sorted(folder.glob("*.safetensors")):
        try:
            with safe_open(str(fp), framework="pt") as fh:
                for key in fh.keys():
                    if "vision" in key or "multi_modal" in key:
                        continue
                    n = 1
                    for d in fh.get_slice(key).get_shape():
                        n *= int(d)
                    total += n
        except (SafetensorError, OSError, ValueError) as exc:
            raise ModelLoadError(f"{fp.name}: corrupt or truncated safetensors file ({exc})") from exc
    return total


def load_hf_folder(folder: str | Path, dtype: torch.dtype) -> tuple[ModelConfig, dict[str, torch.Tensor], Tokenizer | None]:
    from engine.model.loader.checks import check_config

    folder = Path(folder)
    config = hf_config(folder)
    if any(folder.glob("*.safetensors")):  # (without weights hf_state_dict says what is missing)
        check_config(config, hf_parameter_count(folder), str(folder / "config.json"))
    else:
        check_config(config, None, str(folder / "config.json"))
    return config, hf_state_dict(folder, dtype), hf_tokenizer(folder)
