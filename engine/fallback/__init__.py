"""Requests that do not fit: the policy, the plan and report, and serving a request through them.

- `planner`: `LongRequest`, `FallbackPolicy`, `fit` (the prompts to send and the report) and
  `run_with_fallback` (fit, generate, reduce).
- `token_text`: a document as token ids with character offsets, paragraph and sentence starts,
  snapping and chunking on them.
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

__all__ = ["ChunkInfo", "FallbackPlan", "FallbackPolicy", "FallbackReport", "LongRequest", "fit", "run_with_fallback"]
