"""The text side of the fallback, as an interface: what the engine needs from text helpers it does
not own (retrieval scoring, key-entity retention). The engine imports nothing from the pipelines;
the app passes an implementation in (`pipelines.text.fallback_tools.PipelineTextTools`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable


@runtime_checkable
class TextTools(Protocol):
    def retrieval_scores(self, document: str, query: str, chunks: Sequence[str],
                         windows: Sequence[Sequence[str]], retriever: str) -> tuple[list[float], str]:
        """One score per chunk (higher = more relevant). `windows[i]` is chunk i cut into embedding
        windows; `retriever` is the policy's "auto" | "embedding" | "bm25". Returns the scores and
        the method used ("embedding:minilm", "bm25", ...)."""
        ...

    def entity_retention(self, text: str, seen_spans: Sequence[tuple[int, int]]) -> tuple[int, int, list[str]]:
        """(entities_total, entities_kept, lost) of `text`'s distinct key entities, an entity kept
        when one of its occurrences lies wholly inside one of the character spans `seen_spans`."""
        ...

    def entity_retention_texts(self, text: str, seen: Sequence[str]) -> tuple[int, int, list[str]]:
        """As `entity_retention` when only the texts of the pieces seen are known."""
        ...
