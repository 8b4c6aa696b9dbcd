"""The shared document model and ingest.

A `Document` holds one text; pages are character ranges of it; for PDFs every character has a
box. Everything a pipeline extracts points back into the text through a `SourceSpan`
(`doc_id, char_start, char_end, page, bbox`) with `doc.text[char_start:char_end] == span.text`.
"""

from pipelines.documents.ingest import IngestError, IngestLimits, load_bytes, load_document
from pipelines.documents.model import Document, DocumentInfo, Furniture, Page, SourceSpan

__all__ = [
    "Document",
    "DocumentInfo",
    "Furniture",
    "IngestError",
    "IngestLimits",
    "Page",
    "SourceSpan",
    "load_bytes",
    "load_document",
]
