"""Document, Page and SourceSpan: one text per document, pages as character ranges, spans as offsets.

Design (spaCy's Doc/Span idea): the text is never copied into annotations; every annotation is a
pair of offsets into `Document.text`. `Document.span(start, end)` builds the exportable
`SourceSpan`, which adds the page and, for text that came from a PDF, the bounding box (union of
the character boxes on the span's first page, PDF points, origin top-left, like pdfplumber).
"""

from __future__ import annotations

import bisect
import hashlib
from dataclasses import dataclass, field

import numpy as np
from pydantic import BaseModel, ConfigDict, Field


class SourceSpan(BaseModel):
    """Where an extracted item lives: `text == doc.text[char_start:char_end]`."""

    model_config = ConfigDict(frozen=True)

    doc_id: str
    char_start: int = Field(ge=0)
    char_end: int = Field(ge=0)
    page: int = Field(ge=1, description="1-based page of the span's first character")
    bbox: tuple[float, float, float, float] | None = Field(
        default=None, description="x0, top, x1, bottom in PDF points on `page` (PDF input only)"
    )
    text: str


class DocumentInfo(BaseModel):
    """The `document` block of an export: what was analysed (see `Document.info()`)."""

    model_config = ConfigDict(extra="forbid")

    doc_id: str
    source_name: str
    format: str
    encoding: str | None = None
    sha256: str
    n_chars: int
    n_pages: int


@dataclass(frozen=True)
class Page:
    """A page: its 1-based number, the character range it covers, and its size (PDF points)."""

    number: int
    char_start: int
    char_end: int
    width: float | None = None
    height: float | None = None


@dataclass(frozen=True)
class Furniture:
    """Text recognised as page furniture and kept out of `Document.text`: running headers and
    footers, page numbers, line numbers."""

    kind: str  # "header" | "footer" | "page_number" | "line_number"
    page: int
    text: str
    bbox: tuple[float, float, float, float] | None = None


@dataclass
class Document:
    """One document: its text, its pages, and (PDF only) one box per character.

    `char_boxes` is a float32 array of shape (len(text), 4) with NaN rows for characters that
    have no box (inserted spaces and newlines), or None for non-PDF input.
    """

    doc_id: str
    text: str
    pages: list[Page]
    source_name: str = ""
    source_format: str = "txt"  # txt | md | docx | pdf
    encoding: str | None = None
    sha256: str = ""
    char_boxes: np.ndarray | None = None
    furniture: list[Furniture] = field(default_factory=list)
    metadata: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.pages:
            self.pages = [Page(1, 0, len(self.text))]
        if self.char_boxes is not None and len(self.char_boxes) != len(self.text):
            raise ValueError("char_boxes must have one row per character of text")
        self._page_starts = [p.char_start for p in self.pages]

    @classmethod
    def from_text(cls, text: str, doc_id: str = "doc", source_name: str = "", **kw) -> Document:
        """A document from a string (pasted text, tests); form feeds split pages."""
        pages: list[Page] = []
        start = 0
        for i, part in enumerate(text.split("\f")):
            pages.append(Page(i + 1, start, start + len(part)))
            start += len(part) + 1
        sha = hashlib.sha256(text.encode("utf-8")).hexdigest()
        return cls(doc_id=doc_id, text=text, pages=pages, source_name=source_name or doc_id, sha256=sha, **kw)

    def page_of(self, offset: int) -> int:
        """1-based page number holding character `offset`."""
        i = bisect.bisect_right(self._page_starts, offset) - 1
        return self.pages[max(i, 0)].number

    def bbox_of(self, start: int, end: int) -> tuple[float, float, float, float] | None:
        """Union of the character boxes of [start, end) that lie on the span's first page."""
        if self.char_boxes is None or end <= start:
            return None
        page = self.pages[max(bisect.bisect_right(self._page_starts, start) - 1, 0)]
        stop = min(end, page.char_end)
        boxes = self.char_boxes[start:stop]
        boxes = boxes[~np.isnan(boxes[:, 0])] if len(boxes) else boxes
        if not len(boxes):
            return None
        return (
            round(float(boxes[:, 0].min()), 2),
            round(float(boxes[:, 1].min()), 2),
            round(float(boxes[:, 2].max()), 2),
            round(float(boxes[:, 3].max()), 2),
        )

    def span(self, start: int, end: int) -> SourceSpan:
        """The exportable source of text[start:end]."""
        if not 0 <= start <= end <= len(self.text):
            raise ValueError(f"span [{start}, {end}) outside document of {len(self.text)} chars")
        return SourceSpan(
            doc_id=self.doc_id,
            char_start=start,
            char_end=end,
            page=self.page_of(start),
            bbox=self.bbox_of(start, end),
            text=self.text[start:end],
        )

    def trimmed_span(self, start: int, end: int) -> SourceSpan:
        """Like `span`, with surrounding whitespace left out."""
        while start < end and self.text[start].isspace():
            start += 1
        while end > start and self.text[end - 1].isspace():
            end -= 1
        return self.span(start, end)

    def info(self) -> dict:
        """The `document` block of an export."""
        return {
            "doc_id": self.doc_id,
            "source_name": self.source_name,
            "format": self.source_format,
            "encoding": self.encoding,
            "sha256": self.sha256,
            "n_chars": len(self.text),
            "n_pages": len(self.pages),
        }
