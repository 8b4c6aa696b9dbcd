"""Contract anchor alignment: two versions of an agreement, every clause aligned, every change explained.

Modules: `numerals` (Chinese/Roman/full-width numbers), `structure` (clauses, anchors, definitions,
cross-references), `similarity` (n-grams, rapidfuzz, MiniLM), `align` (global assignment, split/merge,
moves, renumbering), `redline` (word/character diff with offsets), `flags` (material changes),
`model` (export contract), `pipeline` (the pipeline and `compare_texts`), `render` (terminal and HTML),
`evaluate`, `synthetic` and `calibrate` (measuring against truth).
"""

from pipelines.contracts.model import ContractResult
from pipelines.contracts.pipeline import ContractsPipeline, apply_changes, compare_documents, compare_texts
from pipelines.contracts.render import redline_html, render_terminal

__all__ = [
    "ContractResult",
    "ContractsPipeline",
    "apply_changes",
    "compare_documents",
    "compare_texts",
    "redline_html",
    "render_terminal",
]
