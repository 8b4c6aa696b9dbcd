"""Ingest: a file on disk (or bytes from an upload) becomes a `Document`, or a one-line `IngestError`.

Formats: .txt/.md (UTF-8, UTF-16 by BOM or by the evidence of its zero bytes, GB18030/GBK and
others detected with charset-normalizer; stray NUL bytes dropped; the encoding and why it was
chosen kept on the Document), .docx (python-docx: paragraphs, list numbering rendered, tables; the
zip's part sizes checked before and while decompressing), .pdf (pdfplumber: a box per character,
repeated headers/footers, page numbers and line numbers recognised and kept out of the text).
Bad input never raises anything but `IngestError`, whose message names the file and the reason.

Hostile input: only regular files are read (FIFOs, devices, sockets refused before opening), the
size limit holds on the file and on the bytes read, and `IngestLimits` bounds what a file may
unpack or decode to (`max_text_chars`: the README's "Input limits" says what it costs).
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path

from pipelines.documents.model import Document

log = logging.getLogger(__name__)

# The longest text (characters, after decoding or parsing) a pipeline is given; README "Input limits".
MAX_TEXT_CHARS = 500_000
TEXT_CHARS_ENV = "LONGDOC_MAX_TEXT_CHARS"


def _max_text_chars() -> int:
    """The text limit: $LONGDOC_MAX_TEXT_CHARS when set (every command and the UI read it), else
    MAX_TEXT_CHARS. A value that is not a positive whole number is an IngestError naming the
    variable (every command prints those as one line)."""
    raw = os.environ.get(TEXT_CHARS_ENV, "").strip().replace("_", "").replace(",", "")
    if not raw:
        return MAX_TEXT_CHARS
    if not raw.isdigit() or int(raw) < 1:
        raise IngestError(TEXT_CHARS_ENV, f"{os.environ[TEXT_CHARS_ENV]!r} is not a positive number of characters")
    return int(raw)

TEXT_SUFFIXES = {".txt", ".md", ".markdown", ".text"}
SUPPORTED_SUFFIXES = TEXT_SUFFIXES | {".docx", ".pdf"}


class IngestError(Exception):
    """A file that cannot be read. `str(err)` is one line: '<file>: <reason>'."""

    def __init__(self, name: str, reason: str):
        from pipelines.documents.model import visible_controls

        self.name = visible_controls(str(name))  # printed on a terminal: no control character gets through
        self.reason = visible_controls(str(reason))
        super().__init__(f"{self.name}: {self.reason}")


@dataclass(frozen=True)
class IngestLimits:
    """What a file may cost before it is refused (each refusal is a one-line `IngestError`).

    `max_bytes` bounds the file (checked on its size and on the bytes actually read);
    `max_text_chars` the text after decoding or parsing (what every pipeline then works on: the
    limit a 2-core, 24 GiB machine affords, measured in the README's "Input limits");
    `max_pages` a PDF; `max_docx_part_bytes` and `max_docx_unpacked_bytes` what a .docx (a zip)
    may unpack to: any one part, and all parts together (declared sizes checked before, actual
    bytes while decompressing).
    """

    max_bytes: int = 50 * 1024 * 1024
    max_pages: int = 2000
    min_text_chars: int = 1
    max_text_chars: int = field(default_factory=_max_text_chars)
    max_docx_part_bytes: int = 64 * 1024 * 1024
    max_docx_unpacked_bytes: int = 256 * 1024 * 1024


def doc_id_for(name: str) -> str:
    """A stable, readable id from a file name."""
    stem = Path(name).name
    return re.sub(r"[^\w.\-]+", "_", stem, flags=re.UNICODE).strip("_") or "doc"


def load_document(path: str | Path, limits: IngestLimits | None = None, doc_id: str | None = None) -> Document:
    """Read a file into a Document; raise IngestError (one line, naming the file) on bad input.

    Only regular files are read (a symbolic link counts as what it points to): a FIFO, a device,
    a socket or a folder is refused before it is opened, and the size limit holds on the file's
    size and on the bytes read (at most `max_bytes + 1` are read)."""
    path = Path(path)
    limits = limits or IngestLimits()
    name = str(path)
    data = read_regular_file(path, name, limits.max_bytes)
    return load_bytes(data, name, limits=limits, doc_id=doc_id)


def _not_regular(mode: int) -> str | None:
    """What a file of this mode is, when it is not a regular file."""
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def _over_limit(name: str, size: int, max_bytes: int) -> IngestError:
    return IngestError(name, f"file is {size / 1e6:.1f} MB, over the {max_bytes / 1e6:.0f} MB limit")


def read_regular_file(path: Path, name: str, max_bytes: int) -> bytes:
    """The bytes of a regular file of at most `max_bytes`, or a one-line IngestError.

    The file's kind is checked with stat (following symbolic links) before it is opened, and again
    on the open descriptor (opened non-blocking, so a FIFO swapped in between cannot hang); at
    most `max_bytes + 1` bytes are read, so a file that grows while read is refused too."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        if os.path.islink(path):
            raise IngestError(name, "broken symbolic link (its target does not exist)") from None
        raise IngestError(name, "no such file") from None
    except OSError as exc:
        raise IngestError(name, f"cannot be read ({exc.strerror or exc})") from None
    target = f" ({os.path.realpath(path)})" if os.path.islink(path) else ""
    kind = _not_regular(st.st_mode)
    if kind == "a folder":
        raise IngestError(name, f"is a folder{target}, not a file")
    if kind:
        raise IngestError(name, f"is {kind}{target}, not a regular file; only regular files are read")
    if st.st_size > max_bytes:
        raise _over_limit(name, st.st_size, max_bytes)
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_BINARY", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        raise IngestError(name, f"cannot be read ({exc.strerror or exc})") from None
    try:
        kind = _not_regular(os.fstat(fd).st_mode)
        if kind:  # replaced between the check and the open
            raise IngestError(name, f"is {kind}{target}, not a regular file; only regular files are read")
        chunks, got = [], 0
        while got <= max_bytes:
            chunk = os.read(fd, min(1 << 20, max_bytes + 1 - got))
            if not chunk:
                break
            chunks.append(chunk)
            got += len(chunk)
    except OSError as exc:
        raise IngestError(name, f"cannot be read ({exc.strerror or exc})") from None
    finally:
        os.close(fd)
    if got > max_bytes:
        raise IngestError(name, f"file grew past the {max_bytes / 1e6:.0f} MB limit while being read")
    return b"".join(chunks)


def load_bytes(data: bytes, name: str, limits: IngestLimits | None = None, doc_id: str | None = None) -> Document:
    """Read the bytes of a file named `name` (its suffix picks the format) into a Document."""
    limits = limits or IngestLimits()
    suffix = Path(name).suffix.lower()
    if suffix not in SUPPORTED_SUFFIXES:
        shown = suffix or "(none)"
        raise IngestError(name, f"unsupported file type {shown}; expected one of .txt, .md, .docx, .pdf")
    if len(data) > limits.max_bytes:
        raise _over_limit(name, len(data), limits.max_bytes)
    if not data.strip():
        raise IngestError(name, "file is empty")
    did = doc_id or doc_id_for(name)
    try:
        if suffix in TEXT_SUFFIXES:
            doc = _load_text(data, name, did, limits)
        elif suffix == ".docx":
            from pipelines.documents.docx_ingest import load_docx

            doc = load_docx(data, name, did, limits=limits)
        else:
            from pipelines.documents.pdf_ingest import load_pdf

            doc = load_pdf(data, name, did, max_pages=limits.max_pages)
    except IngestError:
        raise
    except Exception as exc:  # any parser failure becomes one line, never a traceback
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise IngestError(name, f"cannot be parsed as {suffix[1:]} ({reason[:160]})") from None
    _check_text_size(name, len(doc.text), limits)
    if len(doc.text.strip()) < limits.min_text_chars:
        raise IngestError(name, "no text found in the file")
    doc.sha256 = hashlib.sha256(data).hexdigest()
    return doc


def _check_text_size(name: str, n_chars: int, limits: IngestLimits) -> None:
    if n_chars > limits.max_text_chars:
        raise IngestError(
            name, f"text is {n_chars:,} characters, over the {limits.max_text_chars:,}-character limit"
            f" (split the document, or raise the limit with {TEXT_CHARS_ENV}=N)")


# ---------------------------------------------------------------------------------------------
# Plain text

# At most this share of a text file's bytes may be stray NULs (dropped, and said so); more is binary.
MAX_STRAY_NUL_SHARE = 0.01
# UTF-16 without a byte-order mark, by the zero bytes of its ASCII characters: at least this share
# of the 16-bit units hold a zero byte on the high side of one byte order...
UTF16_NUL_SHARE = 0.10


def decode_text(data: bytes, name: str) -> tuple[str, str, str]:
    """Decode text bytes into (text, encoding, note): the note says why that encoding was chosen
    and what was set aside.

    Order of evidence: a byte-order mark; UTF-16 without one, when the zero bytes say so (below);
    then strict UTF-8, then charset-normalizer's best guess. A zero byte is a strong sign of
    UTF-16 only in numbers: UTF-16 text of Latin script has a zero high byte in nearly every 16-bit
    unit, all at alternating positions. So UTF-16 without a BOM needs zero bytes at one parity in
    at least 10% of the units (twice as many as at the other parity), or, for CJK text whose ASCII
    is sparse, at least two such zero bytes in bytes that are not UTF-8 once they are removed; and
    in either case the decoded text must read as common characters. Other zero bytes are stray
    bytes: a trailing run is padding, and up to 1% of the bytes are dropped (the note says how
    many, and where the first was); more is binary data. Raises IngestError for binary junk."""
    if data.startswith(b"\xef\xbb\xbf"):
        return data[3:].decode("utf-8", errors="replace"), "utf-8-sig", "UTF-8 byte-order mark"
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        order = "little" if data.startswith(b"\xff\xfe") else "big"
        return data.decode("utf-16", errors="replace"), "utf-16", f"UTF-16 byte-order mark ({order}-endian)"
    notes: list[str] = []
    if b"\x00" in data:
        utf16 = _utf16_by_evidence(data)
        if utf16 is not None:
            return utf16
        body = data.rstrip(b"\x00")
        if len(body) < len(data):
            notes.append(f"{len(data) - len(body)} trailing NUL byte(s) (padding) dropped")
        nuls = body.count(0)
        if nuls > max(1, MAX_STRAY_NUL_SHARE * len(body)):
            raise IngestError(name, "binary data, not text (NUL bytes found)")
        if nuls:
            first = body.index(0)
            notes.insert(0, f"{nuls} stray NUL byte(s) dropped (the first at byte {first}); not UTF-16")
            body = body.replace(b"\x00", b"")
        data = body
        if not data.strip():
            raise IngestError(name, "binary data, not text (NUL bytes only)")
    text, encoding, why = _decode_8bit(data, name)
    note = "; ".join([why, *notes])
    if notes:
        log.warning("%s: %s", name, note)
    return text, encoding, note


def _utf16_by_evidence(data: bytes) -> tuple[str, str, str] | None:
    """(text, encoding, note) when the zero bytes of `data` show UTF-16 without a BOM, else None."""
    if len(data) % 2:
        return None
    units = len(data) // 2
    even, odd = data[0::2].count(0), data[1::2].count(0)
    cleaned_is_utf8: bool | None = None
    for enc, high, low in (("utf-16-le", odd, even), ("utf-16-be", even, odd)):
        if high < 2 or high < 2 * low:
            continue
        share = high / units
        if share < UTF16_NUL_SHARE:
            if cleaned_is_utf8 is None:
                cleaned_is_utf8 = _is_utf8(data.replace(b"\x00", b""))
            if cleaned_is_utf8:
                continue  # UTF-8 with stray NULs, not sparse-ASCII UTF-16
        try:
            text = data.decode(enc)
        except UnicodeDecodeError:
            continue
        score = sum(1 for c in text if _common_char(c)) / max(len(text), 1)
        if score > 0.9 and _looks_like_text(text):
            why = (f"no byte-order mark; {share:.0%} of the 16-bit units have a zero "
                   f"{'second' if enc.endswith('le') else 'first'} byte, at alternating positions")
            if share < UTF16_NUL_SHARE:
                why += ", the rest is not UTF-8"
            return text, enc, why
    return None


def _is_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _decode_8bit(data: bytes, name: str) -> tuple[str, str, str]:
    """(text, encoding, why) of bytes without NULs: strict UTF-8, else charset-normalizer."""
    try:
        return data.decode("utf-8"), "utf-8", "valid UTF-8"
    except UnicodeDecodeError:
        pass
    from charset_normalizer import from_bytes

    best = from_bytes(data, cp_isolation=None).best()
    if best is None:
        raise IngestError(name, "binary data, not text (no text encoding fits)")
    encoding = best.encoding
    why = f"not UTF-8; charset-normalizer's best guess {encoding}"
    # GBK is a subset of GB18030: decode with the superset so rare characters survive.
    if encoding.lower() in {"gbk", "gb2312", "cp936", "hz"}:
        encoding = "gb18030"
        why += ", read as its superset GB18030"
    elif encoding.lower() not in {"big5", "cp950", "big5hkscs"} and _reads_as_gb18030(data):
        # On short texts the detector often takes GBK bytes for Korean or Cyrillic; Chinese
        # documents are what longdoc expects, so strict GB18030 that reads as hanzi wins.
        encoding = "gb18030"
        why += ", but strict GB18030 reads as Chinese"
    text = data.decode(encoding, errors="replace")
    if not _looks_like_text(text):
        raise IngestError(name, "binary data, not text (mostly unprintable characters)")
    return text, encoding, why


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


def _load_text(data: bytes, name: str, doc_id: str, limits: IngestLimits) -> Document:
    text, encoding, note = decode_text(data, name)
    _check_text_size(name, len(text), limits)  # before the character scans below
    if not _looks_like_text(text):
        raise IngestError(name, "binary data, not text (mostly unprintable characters)")
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    fmt = "md" if Path(name).suffix.lower() in {".md", ".markdown"} else "txt"
    return Document.from_text(text, doc_id=doc_id, source_name=Path(name).name, source_format=fmt,
                              encoding=encoding, encoding_note=note)
