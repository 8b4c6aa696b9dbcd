"""Loading a model from a GGUF file: config from metadata (family module), weights dequantised to
the requested dtype and renamed to HF names, tokenizer rebuilt from the vocabulary (cached)."""

from __future__ import annotations

import hashlib
import logging
import math
from pathlib import Path

import torch
from tokenizers import Tokenizer as FastTokenizer

from engine.errors import ModelLoadError
from engine.model.config import ModelConfig
from engine.model.families import family_for_gguf
from engine.model.loader.gguf_file import GGUFFile, read_gguf
from engine.model.tokenizer import Tokenizer

log = logging.getLogger(__name__)


def gguf_config(f: GGUFFile) -> ModelConfig:
    family = family_for_gguf(f.architecture)
    tokens = f.get("tokenizer.ggml.tokens")
    try:
        cfg = family.from_gguf(f.metadata, len(tokens) if tokens is not None else None, set(f.tensors))
    except ModelLoadError as exc:
        raise ModelLoadError(f"{f.path.name}: {exc}") from None
    except (TypeError, ValueError, ZeroDivisionError, KeyError, AttributeError, OverflowError, IndexError) as exc:
        raise ModelLoadError(f"{f.path.name}: invalid GGUF metadata ({type(exc).__name__}: {exc})") from None
    if "rope_freqs.weight" in f.tensors:
        import dataclasses

        factors = tuple(float(x) for x in f.tensor("rope_freqs.weight").reshape(-1))
        cfg.layer_ropes = [dataclasses.replace(r, freq_factors=factors) for r in cfg.layer_ropes]
    return cfg


def gguf_state_dict(f: GGUFFile, config: ModelConfig, dtype: torch.dtype) -> dict[str, torch.Tensor]:
    """HF-named tensors of the file, dequantised and converted to `dtype`."""
    family = family_for_gguf(f.architecture)
    out: dict[str, torch.Tensor] = {}
    for name in f.tensors:
        hf = family.gguf_tensor_name(name)
        if hf is None:
            continue
        arr = family.fix_gguf_tensor(hf, f.tensor(name), config)
        if not arr.flags.writeable:  # F32 tensors are views of the read-only memory map
            arr = arr.copy()
        out[hf] = torch.from_numpy(arr).to(dtype)
    return out


def gguf_tokenizer(f: GGUFFile) -> Tokenizer | None:
    """The file's tokenizer (None if it has none); built once, then read from the engine cache."""
    if f.get("tokenizer.ggml.tokens") is None:
        return None
    from engine.model.loader.gguf_tokenizer import build_gguf_tokenizer
    from engine.paths import cache_dir

    st = f.path.stat()
    key = hashlib.sha256(f"{f.path.resolve()}|{st.st_size}|{st.st_mtime_ns}|v1".encode()).hexdigest()[:24]
    cached = cache_dir() / "tokenizers" / f"{key}.json"
    fast = None
    if cached.is_file():
        try:
            fast = FastTokenizer.from_file(str(cached))
        except Exception:  # a damaged cache entry is rebuilt
            fast = None
    if fast is None:
        fast = build_gguf_tokenizer(f.metadata, f.architecture)
        cached.parent.mkdir(parents=True, exist_ok=True)
        tmp = cached.with_suffix(".tmp")
        fast.save(str(tmp))
        tmp.replace(cached)
    tokens = f.get("tokenizer.ggml.tokens")

    def tok_of(key: str) -> str | None:
        i = f.get(key)
        return tokens[int(i)] if i is not None and int(i) < len(tokens) else None

    types = f.get("tokenizer.ggml.token_type")
    special = {i for i, t in enumerate(types) if int(t) == 3} if types is not None else set()
    return Tokenizer(
        fast,
        bos_token=tok_of("tokenizer.ggml.bos_token_id"),
        eos_token=tok_of("tokenizer.ggml.eos_token_id"),
        chat_template=f.get("tokenizer.chat_template"),
        special_ids=special,
    )


def load_gguf(path: str | Path, dtype: torch.dtype) -> tuple[ModelConfig, dict[str, torch.Tensor], Tokenizer | None]:
    f = read_gguf(path)
    if not f.architecture:
        raise ModelLoadError(f"{Path(path).name}: GGUF has no general.architecture")
    config = gguf_config(f)
    from engine.model.loader.checks import check_config, check_tensor_sizes

    check_config(config, sum(math.prod(t.dims) for t in f.tensors.values()), Path(path).name)
    check_tensor_sizes(config, {n: math.prod(t.dims) for n, t in f.tensors.items()}, Path(path).name)
    weights = gguf_state_dict(f, config, dtype)
    return config, weights, gguf_tokenizer(f)
