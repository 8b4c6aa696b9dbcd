"""Engine settings and the one engine handle per process and settings.

`EngineSettings` names the model (None: the packaged Gemma 3 270M), device, dtype and context
limit; `EngineSettings.from_env()` reads LONGDOC_MODEL / LONGDOC_DEVICE / LONGDOC_DTYPE /
LONGDOC_MAX_MODEL_LEN / LONGDOC_TENSOR_PARALLEL_SIZE. `get_engine(settings)` loads the engine
once per process and settings (lazily, under a lock, so concurrent callers share one load) and
returns the same `LLM` after; when the model cannot load it raises `EngineUnavailable` with one
line saying why.
`engine_lock(llm)` serialises the callers of one engine across threads.
"""

from __future__ import annotations

import os
import threading
import weakref
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

# Requests the scheduler runs at once when the settings leave it open, by device (EngineSettings.num_seqs)
DEFAULT_NUM_SEQS = {"cpu": 8, "cuda": 64}
ENV = {"model": "LONGDOC_MODEL", "device": "LONGDOC_DEVICE", "dtype": "LONGDOC_DTYPE",
       "max_model_len": "LONGDOC_MAX_MODEL_LEN", "tensor_parallel_size": "LONGDOC_TENSOR_PARALLEL_SIZE"}


class EngineUnavailable(RuntimeError):
    """The engine could not be loaded; the message is one line."""


@dataclass(frozen=True)
class EngineSettings:
    """model: a GGUF file or HF folder, None for the packaged default. device: "cpu", "cuda" or None
    (CUDA when available). dtype: float32 / bfloat16 / float16 or None (the engine's default for the
    device). max_model_len: context limit in tokens, None for the model's. max_num_seqs: requests
    the scheduler runs at once (a pipeline's batch); None: `DEFAULT_NUM_SEQS` for the device (64 on
    CUDA, where a review group of 8 documents x 5 questions decodes in one batch; 8 on the CPU,
    where a step already takes seconds), `num_seqs()` resolves it. max_prefill_chunk: prompt tokens per prefill
    step (None: the engine's default). disk_cache_dir / disk_cache_bytes: keep prefixes' and
    documents' KV on disk there (a later process reuses them), capped at that many bytes.
    tensor_parallel_size: processes the model is split over (engine/parallel; None: one)."""

    model: str | None = None
    device: str | None = None
    dtype: str | None = None
    max_model_len: int | None = None
    max_num_seqs: int | None = None
    max_prefill_chunk: int | None = None
    disk_cache_dir: str | None = None
    disk_cache_bytes: int | None = None
    tensor_parallel_size: int | None = None

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None, **over: Any) -> EngineSettings:
        """Settings from the environment; keyword arguments that are not None win over it."""
        env = os.environ if environ is None else environ
        vals: dict[str, Any] = {k: env.get(v) or None for k, v in ENV.items()}
        for key, what in (("max_model_len", "a number of tokens"), ("tensor_parallel_size", "a number of processes")):
            if vals[key] is not None:
                try:
                    vals[key] = int(vals[key])
                except ValueError:
                    raise ValueError(f"{ENV[key]}={vals[key]!r} is not {what}") from None
        vals.update({k: (str(v) if k == "model" and isinstance(v, Path) else v) for k, v in over.items()
                     if v is not None})
        return cls(**vals)

    def device_kind(self) -> str:
        """"cuda" or "cpu" (or another torch device type): the device named, or auto's (CUDA when
        torch sees a GPU)."""
        if self.device is None:
            import torch

            return "cuda" if torch.cuda.is_available() else "cpu"
        return str(self.device).split(":")[0]

    def num_seqs(self) -> int:
        """max_num_seqs, or the device's default."""
        if self.max_num_seqs is not None:
            return self.max_num_seqs
        return DEFAULT_NUM_SEQS.get(self.device_kind(), DEFAULT_NUM_SEQS["cpu"])

    def describe(self) -> str:
        """One line: model, device, dtype, context."""
        return (f"model {self.model or 'Gemma 3 270M (packaged)'}, device {self.device or 'auto'}, "
                f"dtype {self.dtype or 'auto'}, context {self.max_model_len or 'the model maximum'}")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


_ENGINES: dict[EngineSettings, Any] = {}
_LOCK = threading.Lock()


def get_engine(settings: EngineSettings | None = None):
    """The process's `engine.LLM` for `settings` (default: `EngineSettings.from_env()`), loaded on
    first use and shared after. Raises EngineUnavailable (one line) when it cannot load."""
    settings = settings if settings is not None else EngineSettings.from_env()
    with _LOCK:
        llm = _ENGINES.get(settings)
        if llm is None:
            llm = _ENGINES[settings] = _load(settings)
        return llm


_USE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def engine_lock(llm) -> threading.RLock:
    """The lock that serialises work on one engine: its scheduler and caches serve one caller at a
    time, so callers on several threads (the web UI's sessions) take turns."""
    with _LOCK:
        lock = _USE.get(llm)
        if lock is None:
            lock = _USE[llm] = threading.RLock()
        return lock


def forget_engines() -> None:
    """Drop this process's engines (the next `get_engine` loads afresh; their memory goes with the
    last reference; a tensor-parallel engine's worker processes are stopped now)."""
    with _LOCK:
        for llm in _ENGINES.values():
            close = getattr(llm, "close", None)
            if close is not None:
                close()
        _ENGINES.clear()


def loaded_engines() -> list[EngineSettings]:
    """Settings of the engines this process has loaded."""
    with _LOCK:
        return list(_ENGINES)


def _load(settings: EngineSettings):
    try:
        from engine import LLM, CacheConfig, CacheDirError, EngineError, SchedulerConfig
    except ImportError as exc:  # pragma: no cover - a broken install
        raise EngineUnavailable(f"the engine cannot be imported: {exc}") from exc
    try:
        sched = SchedulerConfig(max_num_seqs=settings.num_seqs())
        if settings.max_prefill_chunk is not None:
            sched = SchedulerConfig(max_num_seqs=settings.num_seqs(), max_prefill_chunk=settings.max_prefill_chunk)
        cache = CacheConfig()
        if settings.disk_cache_dir is not None:
            cache = CacheConfig(disk_cache_dir=settings.disk_cache_dir,
                                **({"disk_cache_bytes": settings.disk_cache_bytes} if settings.disk_cache_bytes else {}))
        return LLM(model=settings.model, device=settings.device, dtype=settings.dtype, scheduler=sched, cache=cache,
                   max_model_len=settings.max_model_len, tensor_parallel_size=settings.tensor_parallel_size)
    except (EngineError, OSError, ValueError, RuntimeError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        if isinstance(exc, CacheDirError):  # the model is fine: the cache folder named is not a folder
            raise EngineUnavailable(f"the engine cannot start ({settings.describe()}): {first}") from exc
        raise EngineUnavailable(f"no model could be loaded ({settings.describe()}): {first}") from exc
