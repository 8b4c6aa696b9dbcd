"""Ingest: a file on disk (or bytes from an upload) becomes a `Document`, or a one-line `IngestError`.

Formats: .txt/.md (UTF-8, UTF-16 by BOM, GB18030/GBK and others detected with charset-normalizer),
.docx (python-docx: paragraphs, list numbering rendered, tables), .pdf (pdfplumber: a box per
character, repeated headers/footers, page numbers and line numbers recognised and kept out of the
text). Bad input never raises anything but `IngestError`, whose message names the file and the reason.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

from pipelines.documents.model import Document

TEXT_SUFFIXES = {".txt", ".md", ".markdown", ".text"}
SUPPORTED_SUFFIXES = TEXT_SUFFIXES | {".docx", ".pdf"}


class IngestError(Exception):
    """A file that cannot be read. `str(err)` is one line: '<file>: <reason>'."""

    def __init__(self, name: str, reason: str):
        self.name = name
        self.reason = reason
        super().__init__(f"{name}: {reason}")


@dataclass(frozen=True)
class IngestLimits:
    max_bytes: int = 50 * 1024 * 1024
    max_pages: int = 2000
    min_text_chars: int = 1


def doc_id_for(name: str) -> str:
    """A stable, readable id from a file name."""
    stem = Path(name).name
    return re.sub(r"[^\w.\-]+", "_", stem, flags=re.UNICODE).strip("_") or "doc"


def load_document(path: str | Path, limits: IngestLimits | None = None, doc_id: str | None = None) -> Document:
    """Read a file into a Document; raise IngestError (one line, naming the file) on bad input."""
    path = Path(path)
    limits = limits or IngestLimits()
    name = str(path)
    if not path.exists():
        raise IngestError(name, "no such file")
    if path.is_dir():
        raise IngestError(name, "is a folder, not a file")
    size = path.stat().st_size
    if size > limits.max_bytes:
        raise IngestError(name, f"file is {size / 1e6:.1f} MB, over the {limits.max_bytes / 1e6:.0f} MB limit")
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise IngestError(name, f"cannot be read ({exc.strerror or exc})") from None
    return load_bytes(data, name, limits=limits, doc_id=doc_id)


def load_bytes(data: bytes, name: str, limits: IngestLimits | None = None, doc_id: str | None = None) -> Document:
    """Read the bytes of a file named `name` (its suffix picks the format) into a Document."""
    limits = limits or IngestLimits()
    suffix = Path(name).suffix.lower()
    if suffix not in SUPPORTED_SUFFIXES:
        shown = suffix or "(none)"
        raise IngestError(name, f"unsupported file type {shown}; expected one of .txt, .md, .docx, .pdf")
    if len(data) > limits.max_bytes:
        raise IngestError(name, f"file is {len(data) / 1e6:.1f} MB, over the {limits.max_bytes / 1e6:.0f} MB limit")
    if not data.strip():
        raise IngestError(name, "file is empty")
    did = doc_id or doc_id_for(name)
    try:
        if suffix in TEXT_SUFFIXES:
            doc = _load_text(data, name, did)
        elif suffix == ".docx":
            from pipelines.documents.docx_ingest import load_docx

            doc = load_docx(data, name, did)
        else:
            from pipelines.documents.pdf_ingest import load_pdf

            doc = load_pdf(data, name, did, max_pages=limits.max_pages)
    except IngestError:
        raise
    except Exception as exc:  # any parser failure becomes one line, never a traceback
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise IngestError(name, f"cannot be parsed as {suffix[1:]} ({reason[:160]})") from None
    if len(doc.text.strip()) < limits.min_text_chars:
        raise IngestError(name, "no text found in the file")
    doc.sha256 = hashlib.sha256(data).hexdigest()
    return doc


# ---------------------------------------------------------------------------------------------
# Plain text


def decode_text(data: bytes, name: str) -> tuple[str, str]:
    """Decode text bytes: BOMs first, then strict UTF-8, then charset-normalizer's best guess.

    Raises IngestError for binary junk (NUL bytes outside UTF-16, or mostly control characters).
    """
    if data.startswith(b"\xef\xbb\xbf"):
        return data[3:].decode("utf-8", errors="replace"), "utf-8-sig"
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        return data.decode("utf-16"), "utf-16"
    if b"\x00" not in data:
        try:
            return data.decode("utf-8"), "utf-8"
        except UnicodeDecodeError:
            pass
    else:
        # UTF-16 without BOM: pick the byte order whose characters are common ones. UTF-16 text
        # has an even number of bytes; an odd count (b"\x00\x01\x02", say) is binary.
        best_text, best_enc, best_score = None, None, 0.0
        for enc in ("utf-16-le", "utf-16-be") if len(data) % 2 == 0 else ():
            try:
                text = data.decode(enc)
            except UnicodeDecodeError:
                continue
            score = sum(1 for c in text if _common_char(c)) / max(len(text), 1)
            if score > best_score:
                best_text, best_enc, best_score = text, enc, score
        if best_text is not None and best_score > 0.9 and _looks_like_text(best_text):
            return best_text, best_enc
        raise IngestError(name, "binary data, not text (NUL bytes found)")
    from charset_normalizer import from_bytes

    best = from_bytes(data, cp_isolation=None).best()
    if best is None:
        raise IngestError(name, "binary data, not text (no text encoding fits)")
    encoding = best.encoding
    # GBK is a subset of GB18030: decode with the superset so rare characters survive.
    if encoding.lower() in {"gbk", "gb2312", "cp936", "hz"}:
        encoding = "gb18030"
    elif encoding.lower() not in {"big5", "cp950", "big5hkscs"} and _reads_as_gb18030(data):
        # On short texts the detector often takes GBK bytes for Korean or Cyrillic; Chinese
        # documents are what longdoc expects, so strict GB18030 that reads as hanzi wins.
        encoding = "gb18030"
    text = data.decode(encoding, errors="replace")
    if not _looks_like_text(text):
        raise IngestError(name, "binary data, not text (mostly unprintable characters)")
    return text, encoding


def _reads_as_gb18030(data: bytes) -> bool:
    try:
        text = data.decode("gb18030")
    except UnicodeDecodeError:
        return False
    wide = [c for c in text if ord(c) > 127]
    if not wide:
        return False
    hanzi = sum(1 for c in wide if 0x4E00 <= ord(c) <= 0x9FFF or 0x3000 <= ord(c) <= 0x303F or 0xFF00 <= ord(c) <= 0xFFEF)
    return hanzi >= 0.95 * len(wide)


def _common_char(c: str) -> bool:
    o = ord(c)
    return (
        32 <= o < 127 or c in "\t\n\r\f" or 0xA0 <= o < 0x250 or 0x4E00 <= o <= 0x9FFF
        or 0x3000 <= o <= 0x303F or 0xFF00 <= o <= 0xFFEF or 0x2000 <= o <= 0x206F
    )


def _looks_like_text(text: str) -> bool:
    if not text:
        return False
    bad = sum(1 for c in text if (ord(c) < 32 and c not in "\t\n\r\f") or c == "\ufffd")
    return bad <= 0.02 * len(text)


def _load_text(data: bytes, name: str, doc_id: str) -> Document:
    text, encoding = decode_text(data, name)
    if not _looks_like_text(text):
        raise IngestError(name, "binary data, not text (mostly unprintable characters)")
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    fmt = "md" if Path(name).suffix.lower() in {".md", ".markdown"} else "txt"
    return Document.from_text(text, doc_id=doc_id, source_name=Path(name).name, source_format=fmt, encoding=encoding)

