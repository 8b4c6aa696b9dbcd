"""Contract anchor alignment: two versions of an agreement, every clause aligned, every change explained.

Modules: `structure` (clauses, anchors, definitions, cross-references; numerals and language come
from `pipelines.text`), `similarity` (n-grams, rapidfuzz, MiniLM), `align` (global assignment, split/merge,
moves, renumbering), `redline` (word/character diff with offsets), `flags` (material changes),
`model` (export contract), `pipeline` (the pipeline, `compare_documents` and `compare_texts`).

The names below are the package's public interface (what the app imports); `AlignConfig` holds the
comparison's settings and `warm_up(cfg)` loads what they need ahead of the first comparison.
"""

from pipelines.contracts.align import AlignConfig
from pipelines.contracts.model import AlignmentRow, ContractResult
from pipelines.contracts.pipeline import (
    ContractsPipeline,
    apply_changes,
    compare_documents,
    compare_texts,
    warm_up,
)

__all__ = [
    "AlignConfig",
    "AlignmentRow",
    "ContractResult",
    "ContractsPipeline",
    "apply_changes",
    "compare_documents",
    "compare_texts",
    "warm_up",
]
