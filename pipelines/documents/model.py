"""Document, Page, Span and SourceSpan: one text per document, pages as character ranges, spans as
offsets; DocumentInfo and `input_sha256` for the export.

Design (spaCy's Doc/Span idea): the text is never copied into annotations; every annotation is a
pair of offsets into `Document.text`. A `Span` is that pair (with an optional label) held against
its document: its `text` is read from `doc.text` when asked for. A pipeline's annotation class is
a Span (a frozen subclass) or holds one (`HasSpan`, for classes filled in as a stage goes).
`Span.source()` (or `Document.span(start, end)`) builds the exportable `SourceSpan`, which adds
the page and, for text that came from a PDF, the bounding box (union of the character boxes on
the span's first page, PDF points, origin top-left, like pdfplumber).

`Document.info()` is the `DocumentInfo` block every export carries for each analysed document;
`input_sha256(...)` is the one content hash of a pipeline input (the batch runner's up-to-date key).
"""

from __future__ import annotations

import bisect
import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass, field, fields
from pathlib import Path

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
    """What was analysed: one per input document in every export (`document` in a pipeline that
    takes one document, `documents` in one that takes several). Built by `Document.info()`."""

    model_config = ConfigDict(extra="forbid")

    doc_id: str
    source_name: str
    format: str
    encoding: str | None = None
    encoding_note: str | None = Field(
        default=None, description="text input only: why that encoding was chosen, and any bytes set aside (stray NULs)")
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


_CONTROL = re.compile(r"[\x00-\x08\x0e-\x1f\x7f-\x9f]")


def _picture(m: re.Match) -> str:
    c = ord(m.group())
    return chr(0x2400 + c) if c < 0x20 else "\u2421" if c == 0x7F else "\ufffd"


def visible_controls(text: str) -> str:
    """`text` with every control character but tab, line feed, vertical tab, form feed and carriage
    return replaced, one for one, by a visible stand-in (ESC -> "␛", NUL -> "␀", DEL -> "␡", a C1
    control -> U+FFFD): a document's characters or a file name can then never drive a terminal
    (change its title, clear it, make it blink), and every offset stays where it was."""
    return _CONTROL.sub(_picture, text) if _CONTROL.search(text) else text


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
    encoding_note: str | None = None  # why `encoding` was chosen, and what bytes were set aside
    sha256: str = ""
    char_boxes: np.ndarray | None = None
    furniture: list[Furniture] = field(default_factory=list)
    metadata: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # one for one, so offsets, pages and character boxes stay aligned (see visible_controls)
        self.text = visible_controls(self.text)
        self.source_name = visible_controls(self.source_name)
        self.doc_id = visible_controls(self.doc_id)
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

    @classmethod
    def join(cls, pieces: Iterable[str | tuple[Document, int, int]], doc_id: str = "joined") -> Joined:
        """One document for a model from several: `pieces` in order, each a literal string (a
        heading, a separator) or (document, start, end), a range of a source document's text. The
        result maps every range back (`Joined.to_source`) and forward (`Joined.to_joined`). The one
        way documents are joined for the model: `LLMRun.ask` ("[name]" headings), the medical
        patient text (dated note headings, kept sentences) and the review table's reading (units
        chosen to fit) each build their pieces and call this."""
        chunks: list[str] = []
        segs: list[Segment] = []
        pos = 0
        for piece in pieces:
            if isinstance(piece, str):
                chunks.append(piece)
                pos += len(piece)
                continue
            d, a, b = piece
            if not 0 <= a <= b <= len(d.text):
                raise ValueError(f"join: [{a}, {b}) outside {d.doc_id} of {len(d.text)} chars")
            segs.append(Segment(pos, pos + b - a, d, a))
            chunks.append(d.text[a:b])
            pos += b - a
        return Joined(cls.from_text("".join(chunks), doc_id=doc_id), tuple(segs))

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

    def info(self) -> DocumentInfo:
        """The export's block for this document."""
        return DocumentInfo(
            doc_id=self.doc_id,
            source_name=self.source_name,
            format=self.source_format,
            encoding=self.encoding,
            encoding_note=self.encoding_note,
            sha256=self.sha256,
            n_chars=len(self.text),
            n_pages=len(self.pages),
        )


@dataclass(frozen=True, slots=True, eq=False)
class Span:
    """A range [start, end) of one document's text with an optional label: a view over
    `Document.text`, as spaCy's `Span` is over its `Doc`.

    `text` is read from `doc.text` each time it is asked for (a span stores no copy);
    `source()` is the exportable `SourceSpan` (page, and box for PDF input). Two spans are equal
    when they are of the same class, over the same document object, and agree in every other
    field (offsets, label, and a subclass's own fields). A span has no `len()`, so `if span:`
    asks whether there is one, for an empty span too.

    A pipeline class that needs a labelled range of the document holds a `Span` or is one (a
    frozen dataclass subclass adding keyword-only fields) instead of its own start/end/text fields.
    """

    doc: Document
    start: int
    end: int
    label: str = ""

    def __post_init__(self) -> None:
        if not 0 <= self.start <= self.end <= len(self.doc.text):
            raise ValueError(f"span [{self.start}, {self.end}) outside document of {len(self.doc.text)} chars")

    @property
    def text(self) -> str:
        """doc.text[start:end]."""
        return self.doc.text[self.start:self.end]

    def source(self) -> SourceSpan:
        """The exportable source of this span."""
        return self.doc.span(self.start, self.end)

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return self.doc is other.doc and all(
            getattr(self, f.name) == getattr(other, f.name) for f in fields(self) if f.name != "doc")

    def __hash__(self) -> int:
        return hash((id(self.doc), self.start, self.end, self.label))

    def __repr__(self) -> str:
        label = f", {self.label!r}" if self.label else ""
        return f"Span({self.doc.doc_id!r}, {self.start}, {self.end}{label}: {self.text[:40]!r})"


class HasSpan:
    """For a class that holds its range of the document as `span: Span` (a mutable annotation
    class cannot be a frozen `Span`): `start`, `end` and `text` read through the span."""

    __slots__ = ()
    span: Span

    @property
    def start(self) -> int:
        return self.span.start

    @property
    def end(self) -> int:
        return self.span.end

    @property
    def text(self) -> str:
        return self.span.text


@dataclass(frozen=True)
class Segment:
    """A range [start, end) of a joined document's text that is `doc.text[doc_start:doc_start + end - start]`."""

    start: int
    end: int
    doc: Document
    doc_start: int


@dataclass(frozen=True)
class Joined:
    """A document joined from ranges of others (`Document.join`) and where each range came from."""

    doc: Document
    segments: tuple[Segment, ...]

    @property
    def text(self) -> str:
        return self.doc.text

    def ranges(self) -> list[tuple[int, int]]:
        """The joined text's ranges that come from a source (a passage never crosses from one into the next)."""
        return [(s.start, s.end) for s in self.segments]

    def to_joined(self, doc_id: str, start: int, end: int) -> tuple[int, int] | None:
        """The joined range of `doc_id`'s [start, end), None when that range was not included whole."""
        for s in self.segments:
            if s.doc.doc_id == doc_id and s.doc_start <= start and end <= s.doc_start + (s.end - s.start):
                return s.start + start - s.doc_start, s.start + end - s.doc_start
        return None

    def to_source(self, start: int, end: int, clip: bool = True) -> SourceSpan | None:
        """The source span of the joined [start, end): with `clip`, the part of it inside the first
        segment it overlaps (a passage that begins in a heading starts at the text under it);
        without, only a range inside one segment. None in a heading or separator alone."""
        for s in self.segments:
            if start < s.end and s.start < end or (start == end == s.start):
                if not clip and not (s.start <= start and end <= s.end):
                    return None
                a = s.doc_start + max(start, s.start) - s.start
                b = s.doc_start + min(end, s.end) - s.start
                return s.doc.span(a, b) if a < b else None
        return None


def input_sha256(sources: Iterable[Document | Path]) -> str:
    """The content hash of one pipeline input: over its files sorted by name, each file's name and
    the SHA-256 of its bytes. A loaded `Document` stands for its file (`source_name`, `sha256`), so
    the hash of the paths before ingest equals the hash of the documents after it; a document made
    from a string hashes its UTF-8 text. The order in which the files are given does not count."""
    files = []
    for src in sources:
        if isinstance(src, Document):
            name = Path(src.source_name or src.doc_id).name
            digest = src.sha256 or hashlib.sha256(src.text.encode("utf-8")).hexdigest()
        else:
            name, digest = src.name, hashlib.sha256(Path(src).read_bytes()).hexdigest()
        files.append((name, digest))
    h = hashlib.sha256()
    for name, digest in sorted(files, key=lambda f: f[0]):
        h.update(name.encode("utf-8") + b"\0")
        h.update(bytes.fromhex(digest))
    return h.hexdigest()
