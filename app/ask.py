"""What `longdoc ask` (app/commands/engine.py) and the web UI's Ask page (app/ui/ask_page.py)
share before they hand the questions to `pipelines.llm.LLMRun.ask` (the one door: evidence-first
answers, the document's KV computed once and kept for the next call): the engine settings from the
command line or the page and the fallback choice. The engine is imported inside the functions, so
that importing this module stays fast."""

from __future__ import annotations

from pathlib import Path

from pipelines.llm import INSTRUCTIONS, EngineSettings

FALLBACKS = ("retrieval", "truncate:middle", "truncate:head", "truncate:tail", "map_reduce", "error")
__all__ = ["FALLBACKS", "INSTRUCTIONS", "policy_for", "settings"]


def policy_for(spec: str):
    """A FallbackPolicy from 'retrieval', 'truncate:middle', ...; ValueError for a malformed spec
    (an unknown strategy or side raises the engine's EngineError, one line)."""
    from pipelines.llm.run import fallback_policy

    try:
        return fallback_policy(spec)
    except ValueError as exc:
        raise ValueError(f"--{exc}") from None


def settings(model: Path | str | None = None, device: str | None = None, dtype: str | None = None,
             max_model_len: int | None = None, cache_dir: Path | str | None = None,
             cache_bytes: int | None = None) -> EngineSettings:
    """Engine settings from the flags, the environment filling what they leave out."""
    return EngineSettings.from_env(model=model, device=device, dtype=dtype, max_model_len=max_model_len,
                                   disk_cache_dir=str(cache_dir) if cache_dir else None,
                                   disk_cache_bytes=cache_bytes if cache_dir else None)
