"""The shared document model and ingest.

A `Document` holds one text; pages are character ranges of it; for PDFs every character has a
box. A pipeline's labelled ranges of the text are `Span`s (views over `Document.text`); what it
exports points back into the text through a `SourceSpan` (`doc_id, char_start, char_end, page,
bbox`) with `doc.text[char_start:char_end] == span.text`. `Document.info()` is the export's
`DocumentInfo`; `input_sha256` the content hash of a pipeline input.
"""

from pipelines.documents.ingest import IngestError, IngestLimits, load_bytes, load_document
from pipelines.documents.model import (
    Document,
    DocumentInfo,
    Furniture,
    HasSpan,
    Joined,
    Page,
    Segment,
    SourceSpan,
    Span,
    input_sha256,
    visible_controls,
)

__all__ = [
    "Document",
    "DocumentInfo",
    "Furniture",
    "HasSpan",
    "IngestError",
    "IngestLimits",
    "Joined",
    "Page",
    "Segment",
    "SourceSpan",
    "Span",
    "input_sha256",
    "load_bytes",
    "load_document",
    "visible_controls",
]
