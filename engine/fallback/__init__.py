"""Requests that do not fit: the policy, the plan and report, and serving a request through them.

- `planner`: `LongRequest`, `FallbackPolicy`, `fit` (the prompts to send and the report) and
  `run_with_fallback` (fit, generate, reduce).
- `token_text`: a document as token ids with character offsets, paragraph and sentence starts,
  snapping and chunking on them.
- `tools`: `TextTools`, the interface of the text helpers the caller passes in (retrieval scoring,
  key-entity retention); the engine imports nothing from the pipelines.
"""

from engine.fallback.planner import (
    ChunkInfo,
    FallbackPlan,
    FallbackPolicy,
    FallbackReport,
    LongRequest,
    fit,
    run_with_fallback,
)
from engine.fallback.token_text import TokenText
from engine.fallback.tools import TextTools

__all__ = ["ChunkInfo", "FallbackPlan", "FallbackPolicy", "FallbackReport", "LongRequest", "TextTools", "TokenText",
           "fit", "run_with_fallback"]
