"""Exceptions of the engine: each carries a one-line message naming what went wrong."""

from __future__ import annotations


class EngineError(Exception):
    """Base class of every error the engine raises on purpose."""


class ModelLoadError(EngineError):
    """A model file or folder cannot be used: corrupt, truncated, unknown architecture, missing tensor."""


class UnsupportedModelError(ModelLoadError):
    """The model's architecture (or one of its options) is not implemented by the engine."""


class ContextLengthError(EngineError):
    """A prompt (plus the tokens asked for) does not fit the configured context length."""


class CacheFullError(EngineError):
    """The paged KV cache has no free block left for a request that must run now."""


class CacheDirError(EngineError):
    """A cache folder the caller named cannot be one (the path, or a part of it, is a file)."""


class RequestCancelled(EngineError):
    """The caller's progress callback asked to stop (e.g. during a document's prefill)."""


class TensorParallelError(EngineError):
    """A tensor-parallel engine cannot go on: a rank exited, or the ranks' block tables or sequence
    lengths diverged (the consistency check)."""
