"""The on-disk KV block store: one checked, content-addressed file per entry, LRU under a byte cap.

An entry is what a cold KV block (or a run of blocks) needs to come back: the token ids it covers,
named CPU tensors (K, V, scales, ...) and a small JSON meta dict, written for one model fingerprint
(`engine.kv.block_hash`). Keys are lowercase hex hashes (chained block hashes); the file of key `k`
is `root/k[:2]/k`.

File format (version 2, little-endian; no pickle):

    0   magic  b"LDKVBLK\\0"                8 bytes
    8   version                            u32
    12  flags (0)                          u32
    16  header length H                    u64
    24  payload length P                   u64
    32  HMAC-SHA256 of bytes [0, 32) + [64, end), keyed by the store's secret   32 bytes
    64  header: UTF-8 JSON {"key", "fingerprint", "tokens": [ids], "byteorder": "little",
        "tensors": [{"name", "dtype", "shape", "offset", "nbytes"}], "meta"}, zero-padded to 64
    ... payload: the raw tensor bytes, each at a 64-byte aligned offset from the payload start

The file's size is exactly 64 + align64(H) + P. A read maps the file (mmap), checks magic,
version, the size against the preamble and against the store's capacity (no entry larger than it
was ever written), parses the header and checks that its tensor table describes the payload, and
only then computes the keyed checksum; it uses the entry only if the key, the fingerprint and
every token id equal what the caller expects; it then copies the tensors out, so the file may be
deleted at any time after. Any failure — missing pieces, flipped bits, a truncated or foreign file,
another version, another model, other tokens — is logged once at WARNING with the file name and the
reason, the file is removed, and `get` returns None. It never raises on a bad file.

The checksum is keyed (HMAC-SHA256) with a per-folder secret kept outside the folder: in the
user's key folder (`key_dir()`: `$LONGDOC_KEY_DIR`, else `$XDG_CONFIG_HOME/longdoc/kv-keys`, else
`~/.config/longdoc/kv-keys`; mode 0700), one 32-byte file per cache folder (mode 0600) named by a
hash of the folder's device, inode and real path (`key_path`). Whoever can write the cache folder
cannot read or replace the key, so cannot forge an entry. A folder with no key there — copied from
elsewhere, moved, restored from a backup, or written by an older longdoc that kept its `.secret`
inside the folder — gets a new key and its entries, which no key of this folder signed, are dropped
with one warning that says why; an old in-folder `.secret` is deleted. A key file that is not a
32-byte regular file owned by this user with no group or other permissions is not trusted: it is
replaced, and the entries dropped. Limitation: whoever can write the user's key folder can still
forge entries (the key guards the cache against its other writers, not against the user).

Writes go to a temp file in the shard folder (`.<key>.<pid>.<rand>.tmp`), are flushed and fsynced,
then `os.replace`d over the final name (and the folder fsynced), so a reader sees the old file, the
new file or none, never half of one. Two processes writing one key: the last rename wins.

Capacity: the sum of the sizes of the entry files never exceeds `capacity_bytes`; a put first evicts
least recently used entries. Recency is the file's mtime, set on write and touched on every hit, so
it survives restarts: a new DiskStore over the same root rebuilds its accounting by scanning, and
removes leftover temp files of crashed writers. The scan reads each entry's 32-byte preamble and
drops files that cannot be entries (wrong magic or version, a size that disagrees with the
preamble or exceeds the capacity: a 100 GB sparse file is dropped, not hashed, and not counted), so
an invalid file never pushes valid entries out; should the valid-looking files still exceed the
capacity, the largest are fully verified first and those failing are dropped before any LRU
eviction. Everything dropped is logged at WARNING with its reason and counted in `stats()`
(`dropped_invalid`, `dropped_invalid_bytes`; `dropped` lists the last ones with their reasons). Processes sharing a root serialise their mutations
through an exclusive `flock` on `root/.lock`; the lock file also holds a stamp rewritten on every
mutation, and a writer that finds someone else's stamp rescans before it evicts, so the cap holds
across processes too (POSIX; without fcntl the store is single-process). Bytes counted are file
sizes, not filesystem blocks; files in the tree that are not entries are neither counted nor touched.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import logging
import math
import mmap
import os
import re
import secrets
import struct
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
import torch

from engine.errors import CacheDirError
from engine.kv.block_hash import decode_tokens, encode_tokens

try:
    import fcntl
except ImportError:  # pragma: no cover - non-POSIX
    fcntl = None  # type: ignore[assignment]

logger = logging.getLogger(__name__)

MAGIC = b"LDKVBLK\x00"
VERSION = 2  # 1: plain SHA-256 (forgeable by anyone who can write the folder); 2: HMAC-SHA256
ALIGN = 64
_PREAMBLE = struct.Struct("<8sIIQQ")  # magic, version, flags, header length, payload length
_DIGEST_AT = _PREAMBLE.size  # 32
_FIXED = _DIGEST_AT + 32  # 64: header starts here
MAX_HEADER_BYTES = 64 << 20
SECRET_NAME = ".secret"  # where versions before 2026-12-08 kept the key: inside the folder (deleted when found)
SECRET_BYTES = 32
KEY_DIR_ENV = "LONGDOC_KEY_DIR"


def key_dir() -> Path:
    """The user's folder of cache keys (see the module docstring)."""
    env = os.environ.get(KEY_DIR_ENV)
    if env:
        return Path(env)
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "longdoc" / "kv-keys"


def key_path(root: str | os.PathLike[str]) -> Path:
    """The key file of the cache folder `root`: named by its device, inode and real path, so a
    copy or a move of the folder does not find it."""
    st = os.stat(root)
    ident = hashlib.sha256(f"{st.st_dev}:{st.st_ino}:{os.path.realpath(root)}".encode()).hexdigest()[:40]
    return key_dir() / f"{ident}.key"
_DROPPED_KEPT = 100  # reasons kept for stats()

KEY_RE = re.compile(r"[0-9a-f]{16,128}")
_SHARD_RE = re.compile(r"[0-9a-f]{2}")
_TEMP_RE = re.compile(r"\.([0-9a-f]{16,128})\.\d+\.[0-9a-f]+\.tmp")

_DTYPE_NAMES = (
    "float32", "float16", "bfloat16", "float64", "int8", "uint8", "int16", "int32", "int64", "bool",
    "float8_e4m3fn", "float8_e5m2",
)
DTYPES: dict[str, torch.dtype] = {n: getattr(torch, n) for n in _DTYPE_NAMES if hasattr(torch, n)}


def _align(n: int) -> int:
    return (n + ALIGN - 1) // ALIGN * ALIGN


def as_token_bytes(tokens: Sequence[int] | bytes | bytearray | memoryview) -> bytes:
    if isinstance(tokens, bytes | bytearray | memoryview):
        data = bytes(tokens)
        if len(data) % 4:
            raise ValueError("token bytes must be int32 little-endian (length a multiple of 4)")
        return data
    return encode_tokens(tokens)


def check_meta(meta: Mapping[str, Any] | None) -> tuple[dict[str, Any], bytes]:
    """A copy of `meta` and its JSON bytes; TypeError/ValueError when it is not plain JSON."""
    meta = dict(meta or {})
    return meta, json.dumps(meta, sort_keys=True, allow_nan=False).encode()


@dataclass(eq=False)
class BlockEntry:
    """One stored unit of KV: the token ids it covers (int32 LE bytes), named CPU tensors, meta.

    Tensors handed out by a store are shared with it: treat them as read-only.
    """

    token_bytes: bytes
    tensors: dict[str, torch.Tensor]
    meta: dict[str, Any] = field(default_factory=dict)
    fingerprint: str = ""

    @property
    def tokens(self) -> list[int]:
        return decode_tokens(self.token_bytes)

    @property
    def num_tokens(self) -> int:
        return len(self.token_bytes) // 4

    @property
    def tensor_bytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in self.tensors.values())

    def matches(self, tokens: Sequence[int] | bytes, fingerprint: str) -> bool:
        """True when this entry was made by `fingerprint` over exactly `tokens`."""
        return self.fingerprint == fingerprint and self.token_bytes == as_token_bytes(tokens)


class BadFile(Exception):
    """A block file that must not be used; the message is the reason."""


class ForeignEntry(BadFile):
    """A sound block file written for another key, model fingerprint or token ids."""


def _cpu_bytes(t: torch.Tensor) -> np.ndarray:
    """The tensor's raw bytes as a uint8 numpy array (no copy for contiguous CPU tensors)."""
    t = t.detach()
    if t.device.type != "cpu":
        t = t.cpu()
    return t.contiguous().reshape(-1).view(torch.uint8).numpy()


def encode_entry(
    key: str,
    token_bytes: bytes,
    tensors: Mapping[str, torch.Tensor],
    fingerprint: str,
    meta: dict[str, Any],
) -> tuple[bytes, list[np.ndarray], list[int], int]:
    """File head (preamble, zeroed digest, padded JSON header), payload pieces, their offsets in the
    payload, payload length."""
    table, pieces, offsets = [], [], []
    pos = 0
    for name, tensor in tensors.items():
        if not isinstance(name, str) or not isinstance(tensor, torch.Tensor):
            raise TypeError("tensors must map str names to torch.Tensor")
        dtype = str(tensor.dtype).removeprefix("torch.")
        if dtype not in DTYPES:
            raise ValueError(f"tensor {name!r}: dtype {dtype} is not storable")
        data = _cpu_bytes(tensor)
        pos = _align(pos)
        table.append({"name": name, "dtype": dtype, "shape": list(tensor.shape), "offset": pos,
                      "nbytes": int(data.nbytes)})
        pieces.append(data)
        offsets.append(pos)
        pos += data.nbytes
    header = {
        "key": key,
        "fingerprint": fingerprint,
        "tokens": decode_tokens(token_bytes),
        "byteorder": "little",
        "tensors": table,
        "meta": meta,
    }
    text = json.dumps(header, separators=(",", ":"), allow_nan=False).encode()
    padded = text + b"\x00" * (_align(_FIXED + len(text)) - _FIXED - len(text))
    preamble = _PREAMBLE.pack(MAGIC, VERSION, 0, len(text), pos)
    return preamble + bytes(32) + padded, pieces, offsets, pos


def _check_header(h: Any, payload_len: int) -> list[tuple[str, torch.dtype, list[int], int, int]]:
    if not isinstance(h, dict):
        raise BadFile("header is not a JSON object")
    for name, kind in (("key", str), ("fingerprint", str), ("tokens", list), ("tensors", list), ("meta", dict)):
        if not isinstance(h.get(name), kind):
            raise BadFile(f"header field {name!r} missing or not a {kind.__name__}")
    if h.get("byteorder") != "little":
        raise BadFile(f"byte order {h.get('byteorder')!r} is not little-endian")
    out = []
    for item in h["tensors"]:
        try:
            name, dtype_name, shape = item["name"], item["dtype"], item["shape"]
            offset, nbytes = item["offset"], item["nbytes"]
        except (KeyError, TypeError):
            raise BadFile("tensor table entry malformed") from None
        dtype = DTYPES.get(dtype_name) if isinstance(dtype_name, str) else None
        if dtype is None or not isinstance(name, str):
            raise BadFile(f"tensor table entry has an unknown dtype {dtype_name!r}")
        ints = [offset, nbytes, *shape] if isinstance(shape, list) else None
        if ints is None or len(shape) > 16 or not all(
            isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 2**62 for v in ints
        ):
            raise BadFile(f"tensor {name!r}: shape/offset/nbytes are not non-negative integers")
        elem = torch.empty((), dtype=dtype).element_size()
        if nbytes != math.prod(shape) * elem or offset % ALIGN or offset + nbytes > payload_len:
            raise BadFile(f"tensor {name!r}: extent does not match its shape or the payload")
        out.append((name, dtype, shape, offset, nbytes))
    end = max((o + n for *_, o, n in out), default=0)
    if end != payload_len:
        raise BadFile(f"tensor table covers {end} payload bytes, the preamble says {payload_len}")
    return out


def check_preamble(pre: bytes, size: int, max_size: int | None) -> tuple[int, int, int]:
    """(header length, payload length, payload offset) of a block file of `size` bytes whose first 32
    bytes are `pre`; BadFile when they cannot belong to an entry (nothing else is read)."""
    if size < _FIXED or len(pre) < _PREAMBLE.size:
        raise BadFile(f"truncated: {size} bytes, shorter than the fixed preamble")
    magic, version, _flags, header_len, payload_len = _PREAMBLE.unpack_from(pre, 0)
    if magic != MAGIC:
        raise BadFile("wrong magic: not a longdoc KV block file")
    if version != VERSION:
        raise BadFile(f"format version {version}, this reader knows {VERSION}")
    if header_len > MAX_HEADER_BYTES:
        raise BadFile(f"header length {header_len} is implausible")
    payload_at = _align(_FIXED + header_len)
    if size != payload_at + payload_len:
        raise BadFile(f"size {size} bytes, header says {payload_at + payload_len} (truncated or extended)")
    if max_size is not None and size > max_size:
        raise BadFile(f"size {size} bytes exceeds the store's capacity of {max_size} (never written by it)")
    return header_len, payload_len, payload_at


def read_entry(f: BinaryIO, key: str, fingerprint: str, token_bytes: bytes, pin: bool = False, *,
               secret: bytes, max_size: int | None = None) -> BlockEntry:
    """Map, verify and copy out the entry of open file `f`; BadFile(reason) when it must not be used.

    Sizes are checked against the preamble, `max_size` and the header's tensor table before the
    keyed checksum is computed, so a huge (e.g. sparse) file is refused without being read."""
    size = os.fstat(f.fileno()).st_size
    header_len, payload_len, payload_at = check_preamble(os.pread(f.fileno(), _PREAMBLE.size, 0), size, max_size)
    mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    try:
        if len(mm) != size:
            raise BadFile(f"size changed while reading ({len(mm)} bytes, was {size})")
        try:
            header = json.loads(bytes(mm[_FIXED : _FIXED + header_len]).decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
            raise BadFile(f"header is not JSON: {exc}") from None
        table = _check_header(header, payload_len)
        digest = _file_digest(mm, size, secret)
        if not hmac.compare_digest(digest, mm[_DIGEST_AT:_FIXED]):
            raise BadFile("checksum mismatch (altered, or not written with this folder's secret)")
        if header["key"] != key:
            raise ForeignEntry(f"written for key {header['key'][:16]}..., not this one")
        if header["fingerprint"] != fingerprint:
            raise ForeignEntry("written for another model fingerprint")
        try:
            stored_tokens = encode_tokens(header["tokens"])
        except (ValueError, TypeError):
            raise BadFile("token ids in the header are not int32") from None
        if stored_tokens != token_bytes:
            raise ForeignEntry(f"token ids differ from the expected {len(token_bytes) // 4} tokens")
        if sys.byteorder != "little":  # pragma: no cover - no big-endian CI
            raise BadFile("stored little-endian; this machine is big-endian")
        tensors: dict[str, torch.Tensor] = {}
        pin = pin and torch.cuda.is_available()
        for name, dtype, shape, offset, nbytes in table:
            try:
                out = torch.empty(shape, dtype=dtype, pin_memory=pin)
            except RuntimeError as exc:
                raise BadFile(f"tensor {name!r}: cannot allocate shape {shape}: {exc}") from None
            if nbytes:
                src = np.frombuffer(mm, dtype=np.uint8, count=nbytes, offset=payload_at + offset)
                out.reshape(-1).view(torch.uint8).numpy()[:] = src
                del src
            tensors[name] = out
        return BlockEntry(stored_tokens, tensors, header["meta"], fingerprint)
    finally:
        mm.close()


def verify_file(path: str | os.PathLike[str], secret: bytes, max_size: int | None = None) -> None:
    """Check a block file's preamble, header and keyed checksum (not its key, model or tokens);
    BadFile(reason) when it fails."""
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        header_len, payload_len, _ = check_preamble(os.pread(f.fileno(), _PREAMBLE.size, 0), size, max_size)
        mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        try:
            try:
                header = json.loads(bytes(mm[_FIXED : _FIXED + header_len]).decode("utf-8"))
            except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
                raise BadFile(f"header is not JSON: {exc}") from None
            _check_header(header, payload_len)
            if not hmac.compare_digest(_file_digest(mm, size, secret), mm[_DIGEST_AT:_FIXED]):
                raise BadFile("checksum mismatch (altered, or not written with this folder's secret)")
        finally:
            mm.close()


def _file_digest(mm: mmap.mmap, size: int, secret: bytes) -> bytes:
    """HMAC-SHA256 (keyed by `secret`) of bytes [0, 32) and [64, size) of a mapped block file,
    without copying it."""
    h = hmac.new(secret, digestmod=hashlib.sha256)
    with memoryview(mm) as view:
        with view[:_DIGEST_AT] as head, view[_FIXED:size] as rest:
            h.update(head)
            h.update(rest)
    return h.digest()


class DiskStore:
    """Content-addressed, checked KV block files under `root`, at most `capacity_bytes` in total."""

    def __init__(self, root: str | os.PathLike[str], capacity_bytes: int, *, durable: bool = True) -> None:
        """Open (creating it if needed) the store at `root`.

        Raises CacheDirError (an EngineError, one line) when `root` or one of its parents is not a
        folder, and OSError when the folder cannot be written (read-only, no permission): the
        engine then runs without the disk store (`engine.core.engine_core.make_cold_tier`)."""
        if capacity_bytes <= 0:
            raise ValueError("capacity_bytes must be positive")
        self.root = Path(root)
        check_cache_dir(self.root)
        try:
            self.root.mkdir(parents=True, exist_ok=True)
        except (FileExistsError, NotADirectoryError):
            raise CacheDirError(f"disk cache folder {self.root}: a part of this path is a file, not a folder") from None
        self.capacity_bytes = int(capacity_bytes)
        self.durable = durable
        self._tlock = threading.RLock()
        self._lock_fd = -1
        self._lock_fd = os.open(self.root / ".lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
        self._index: OrderedDict[str, tuple[int, int]] = OrderedDict()  # key -> (size, mtime ns); LRU first
        self._verified: set[str] = set()  # keys whose keyed checksum this instance checked (written or read)
        self._bytes = 0
        self._stamp = b""
        self._clock = 0
        self._warned: set[tuple[int, int]] = set()
        self.hits = self.misses = self.writes = self.evictions = 0
        self.rejected_corrupt = self.rejected_mismatch = self.rejected_too_large = self.write_errors = 0
        self.temps_removed = 0
        self.dropped_invalid = self.dropped_invalid_bytes = 0
        self.dropped: list[tuple[str, str]] = []  # (file name, reason), the last _DROPPED_KEPT
        self.new_secret = False
        self.key_note: str | None = None
        try:
            with self._locked():
                self._probe_writable()
                self.secret, self.new_secret = self._load_or_create_secret()
                self._rescan(drop_all=self.new_secret)
        except BaseException:
            self.close()
            raise

    # -- public API -------------------------------------------------------------------------------

    @property
    def bytes_used(self) -> int:
        return self._bytes

    def __len__(self) -> int:
        return len(self._index)

    def keys(self) -> list[str]:
        """Keys known to this instance, least recently used first."""
        with self._tlock:
            return list(self._index)

    def path_for(self, key: str) -> Path:
        _check_key(key)
        return self.root / key[:2] / key

    def contains(self, key: str) -> bool:
        return key in self._index or self.path_for(key).is_file()

    def put(
        self,
        key: str,
        tokens: Sequence[int] | bytes,
        tensors: Mapping[str, torch.Tensor],
        *,
        fingerprint: str,
        meta: Mapping[str, Any] | None = None,
    ) -> bool:
        """Write (or overwrite) an entry; False when it is larger than the capacity or the write failed.

        Bad arguments (key not lowercase hex, unstorable dtype, meta not JSON) raise.
        """
        path = self.path_for(key)
        if not fingerprint:
            raise ValueError("fingerprint is required")
        meta, _ = check_meta(meta)
        head, pieces, offsets, payload_len = encode_entry(key, as_token_bytes(tokens), tensors,
                                                          fingerprint, meta)
        size = len(head) + payload_len
        if size > self.capacity_bytes:
            self.rejected_too_large += 1
            logger.debug("disk KV store: entry %s (%d bytes) exceeds the capacity %d", key, size,
                         self.capacity_bytes)
            return False
        with self._locked():
            self._refresh()
            if key in self._index:
                self._index.move_to_end(key)  # rewritten now: evicted last
            self._evict_until(self.capacity_bytes - size)
            tmp = path.parent / f".{key}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
            try:
                path.parent.mkdir(exist_ok=True)
                self._write_file(tmp, head, pieces, offsets, payload_len)
                os.replace(tmp, path)
                if self.durable:
                    _fsync_dir(path.parent)
            except OSError as exc:
                self.write_errors += 1
                with contextlib.suppress(OSError):
                    tmp.unlink()
                # once at WARNING (a full or read-only disk would otherwise warn at every block)
                logger.log(logging.WARNING if self.write_errors == 1 else logging.DEBUG,
                           "disk KV store: could not write %s: %s%s", path, exc,
                           " (further write errors are logged at DEBUG)" if self.write_errors == 1 else "")
                self._bump_stamp()
                return False
            old = self._index.pop(key, None)
            if old is not None:
                self._bytes -= old[0]
            st = path.stat()
            self._index[key] = (st.st_size, st.st_mtime_ns)
            self._verified.add(key)
            self._bytes += st.st_size
            self.writes += 1
            self._bump_stamp()
        return True

    def get(
        self, key: str, *, tokens: Sequence[int] | bytes, fingerprint: str, pin: bool = False
    ) -> BlockEntry | None:
        """The entry under `key` if its file verifies and was written by `fingerprint` over exactly
        `tokens`; otherwise None (a bad file is logged and removed). Tensors are fresh CPU copies,
        in pinned memory when `pin` and CUDA is available."""
        path = self.path_for(key)
        expected = as_token_bytes(tokens)
        try:
            f = open(path, "rb")
        except FileNotFoundError:
            self._forget(key)
            self.misses += 1
            return None
        except OSError as exc:
            logger.warning("disk KV store: cannot open %s: %s", path, exc)
            self.misses += 1
            return None
        with f:
            try:
                entry = read_entry(f, key, fingerprint, expected, pin, secret=self.secret,
                                   max_size=self.capacity_bytes)
            except (BadFile, OSError, ValueError) as exc:
                self._reject(path, f, str(exc), mismatch=isinstance(exc, ForeignEntry))
                self.misses += 1
                return None
            size = os.fstat(f.fileno()).st_size
        now = self._now()
        with contextlib.suppress(OSError):
            os.utime(path, ns=(now, now))
        with self._tlock:
            old = self._index.pop(key, None)
            self._bytes += size - (old[0] if old else 0)
            self._index[key] = (size, now)
            self._verified.add(key)
            self.hits += 1
        return entry

    def discard(self, key: str) -> bool:
        """Remove an entry; True when a file was removed."""
        path = self.path_for(key)
        with self._locked():
            self._forget(key)
            try:
                path.unlink()
            except FileNotFoundError:
                return False
            finally:
                self._bump_stamp()
        return True

    def clear(self) -> None:
        """Remove every entry file (and leftover temp files) under the root."""
        with self._locked():
            self._rescan()
            for key in list(self._index):
                with contextlib.suppress(FileNotFoundError):
                    self.path_for(key).unlink()
            self._index.clear()
            self._bytes = 0
            self._bump_stamp()

    def rescan(self) -> None:
        """Rebuild the accounting from the files on disk (removing leftover temp files)."""
        with self._locked():
            self._rescan()

    def stats(self) -> dict[str, Any]:
        """Counters; `dropped_invalid` / `dropped_invalid_bytes`: files found invalid when the folder
        was scanned (wrong format, sizes, a new secret) and removed, `dropped`: the last of them
        as (file name, reason)."""
        return {
            "entries": len(self._index), "bytes": self._bytes, "capacity_bytes": self.capacity_bytes,
            "hits": self.hits, "misses": self.misses, "writes": self.writes, "evictions": self.evictions,
            "rejected_corrupt": self.rejected_corrupt, "rejected_mismatch": self.rejected_mismatch,
            "rejected_too_large": self.rejected_too_large, "write_errors": self.write_errors,
            "temps_removed": self.temps_removed, "dropped_invalid": self.dropped_invalid,
            "dropped_invalid_bytes": self.dropped_invalid_bytes, "new_secret": self.new_secret,
            "dropped": list(self.dropped),
        }

    def close(self) -> None:
        fd, self._lock_fd = self._lock_fd, -1
        if fd >= 0:
            os.close(fd)

    def __enter__(self) -> DiskStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.close()

    # -- internals --------------------------------------------------------------------------------

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        with self._tlock:
            if self._lock_fd < 0:
                raise RuntimeError("DiskStore is closed")
            if fcntl is not None:
                fcntl.flock(self._lock_fd, fcntl.LOCK_EX)
            try:
                yield
            finally:
                if fcntl is not None:
                    fcntl.flock(self._lock_fd, fcntl.LOCK_UN)

    def _now(self) -> int:
        """Wall-clock ns, strictly increasing within this instance (the LRU clock, kept in mtimes)."""
        with self._tlock:
            self._clock = max(time.time_ns(), self._clock + 1)
            return self._clock

    def _bump_stamp(self) -> None:
        self._stamp = secrets.token_hex(16).encode()
        os.pwrite(self._lock_fd, self._stamp, 0)

    def _refresh(self) -> None:
        """Under the lock: rescan when another process changed the store since our last mutation."""
        if os.pread(self._lock_fd, 32, 0) != self._stamp:
            self._rescan()

    def _probe_writable(self) -> None:
        """Under the lock: OSError unless a file can be created and removed in the root."""
        probe = self.root / f".probe.{os.getpid()}.{secrets.token_hex(4)}"
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        os.close(fd)
        os.unlink(probe)

    def _load_or_create_secret(self) -> tuple[bytes, bool]:
        """Under the lock: (the folder's key from the user's key folder, True when it was created
        now); an old key inside the folder is deleted (it let the folder's writers forge entries)."""
        old = self.root / SECRET_NAME
        if old.exists() or old.is_symlink():
            with contextlib.suppress(OSError):
                old.unlink()
            self.key_note = "the folder held its own key (an older longdoc): it no longer counts"
        path = key_path(self.root)
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
        except FileNotFoundError:
            fd = -1
        except OSError as exc:  # a symlink (ELOOP) or something else unusable: replaced below
            logger.warning("disk KV store: key %s is unusable (%s); making a new one", path, exc)
            fd = -2
        if fd >= 0:
            try:
                st = os.fstat(fd)
                data = os.read(fd, SECRET_BYTES + 1)
            finally:
                os.close(fd)
            import stat as _stat

            problem = None
            if not _stat.S_ISREG(st.st_mode) or len(data) != SECRET_BYTES:
                problem = "not a 32-byte file"
            elif st.st_mode & 0o077:
                problem = f"readable or writable by others (mode {st.st_mode & 0o777:o})"
            elif hasattr(os, "geteuid") and st.st_uid != os.geteuid():
                problem = f"owned by uid {st.st_uid}, not this user"
            if problem is None:
                return data, False
            logger.warning("disk KV store: key %s is not trusted (%s); making a new one", path, problem)
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        with contextlib.suppress(OSError):
            os.chmod(path.parent, 0o700)
        secret = secrets.token_bytes(SECRET_BYTES)
        tmp = path.parent / f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        try:
            os.fchmod(fd, 0o600)  # whatever the umask
            os.write(fd, secret)
            os.fsync(fd)
        finally:
            os.close(fd)
        try:
            os.replace(tmp, path)  # whole or absent: never a half-written key
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
        with contextlib.suppress(OSError):
            _fsync_dir(path.parent)
        return secret, True

    def _drop(self, path: str, size: int, reason: str) -> None:
        """Under the lock: remove an invalid file found by a scan, say so and count it."""
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        self.dropped_invalid += 1
        self.dropped_invalid_bytes += size
        name = os.path.basename(path)
        self.dropped = (self.dropped + [(name, reason)])[-_DROPPED_KEPT:]
        logger.warning("disk KV store: dropping %s: %s", path, reason)

    def _rescan(self, drop_all: bool = False) -> None:
        """Under the lock: rebuild the index from the folder. Files that cannot be entries are
        dropped (see the module docstring), never counted; with `drop_all` (a new secret) every
        entry is, since none can verify."""
        found: list[tuple[int, str, int]] = []
        n_unsigned = 0
        now_ns = time.time_ns()
        for shard in _scandir(self.root):
            if not (shard.is_dir(follow_symlinks=False) and _SHARD_RE.fullmatch(shard.name)):
                continue
            for item in _scandir(Path(shard.path)):
                if _TEMP_RE.fullmatch(item.name):  # under the lock no writer is mid-write: a crash's leftover
                    with contextlib.suppress(OSError):
                        os.unlink(item.path)
                        self.temps_removed += 1
                        logger.info("disk KV store: removed leftover temp file %s", item.path)
                    continue
                if not (KEY_RE.fullmatch(item.name) and item.name[:2] == shard.name):
                    continue
                try:
                    st = item.stat(follow_symlinks=False)
                    if not item.is_file(follow_symlinks=False):
                        continue
                    if drop_all:
                        with contextlib.suppress(FileNotFoundError):
                            os.unlink(item.path)
                        self.dropped_invalid += 1
                        self.dropped_invalid_bytes += st.st_size
                        n_unsigned += 1
                        continue
                    fd = os.open(item.path, os.O_RDONLY | os.O_NOFOLLOW)
                    try:
                        pre = os.pread(fd, _PREAMBLE.size, 0)
                    finally:
                        os.close(fd)
                except OSError:
                    continue
                try:
                    check_preamble(pre, st.st_size, self.capacity_bytes)
                except BadFile as exc:
                    self._drop(item.path, st.st_size, str(exc))
                    continue
                # a date in the future is not believed: it would make a file the last to be evicted
                found.append((min(st.st_mtime_ns, now_ns), item.name, st.st_size))
        if n_unsigned:
            why = self.key_note or (f"no key for this folder in {key_dir()} (copied or moved here, or restored)")
            self.dropped = (self.dropped + [(f"{n_unsigned} entries", f"not signed with this folder's key: {why}")]
                            )[-_DROPPED_KEPT:]
            logger.warning("disk KV store: %s: %s; made a new key and dropped its %d entries (they cannot be "
                           "verified)", self.root, why, n_unsigned)
        if sum(size for _, _, size in found) > self.capacity_bytes:
            # before evicting anything for space, make sure the space is taken by valid entries:
            # the largest files are verified first, and those failing are dropped, not counted
            kept: list[tuple[int, str, int]] = []
            total = sum(size for _, _, size in found)
            for mtime, key, size in sorted(found, key=lambda x: -x[2]):
                if total > self.capacity_bytes:
                    try:
                        verify_file(self.root / key[:2] / key, self.secret, self.capacity_bytes)
                    except BadFile as exc:
                        self._drop(str(self.root / key[:2] / key), size, str(exc))
                        total -= size
                        continue
                    except OSError:
                        pass
                kept.append((mtime, key, size))
            found = kept
        found.sort()
        before = self._index
        self._index = OrderedDict((key, (size, mtime)) for mtime, key, size in found)
        # a checked key stays checked only while its file is the one that was checked
        self._verified = {k for k in self._verified if before.get(k) == self._index.get(k)}
        self._bytes = sum(size for _, _, size in found)
        self._evict_until(self.capacity_bytes)
        self._bump_stamp()

    def _evict_until(self, limit: int) -> None:
        """Under the lock: drop least recently used entries until at most `limit` bytes remain.
        Before a valid entry is evicted for space, the entries this instance has not checked are
        verified, largest first, and those that fail are dropped: a file that only looks like an
        entry never displaces a real one."""
        if self._bytes > limit:
            for key in sorted((k for k in self._index if k not in self._verified), key=lambda k: -self._index[k][0]):
                if self._bytes <= limit:
                    break
                size = self._index[key][0]
                path = self.root / key[:2] / key
                try:
                    verify_file(path, self.secret, self.capacity_bytes)
                except BadFile as exc:
                    self._index.pop(key, None)
                    self._bytes -= size
                    self._drop(str(path), size, str(exc))
                    continue
                except OSError:
                    continue
                self._verified.add(key)
        spared: set[str] = set()
        while self._bytes > limit and self._index:
            key, (size, seen) = self._index.popitem(last=False)
            path = self.root / key[:2] / key
            try:
                st = path.stat()
            except FileNotFoundError:
                self._bytes -= size
                continue
            if st.st_mtime_ns > seen and key not in spared:  # another process read it since: keep it
                spared.add(key)
                self._index[key] = (size, st.st_mtime_ns)
                continue
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
            self._bytes -= size
            self.evictions += 1

    def _forget(self, key: str) -> None:
        with self._tlock:
            old = self._index.pop(key, None)
            if old is not None:
                self._bytes -= old[0]

    def _reject(self, path: Path, f: BinaryIO, reason: str, mismatch: bool) -> None:
        if mismatch:
            self.rejected_mismatch += 1
        else:
            self.rejected_corrupt += 1
        fst = os.fstat(f.fileno())
        ident = (fst.st_dev, fst.st_ino)
        if ident not in self._warned:
            self._warned.add(ident)
            logger.warning("disk KV store: dropping %s: %s", path, reason)
        with self._locked():
            try:
                st = path.stat()
            except OSError:
                self._forget(path.name)
                return
            if (st.st_dev, st.st_ino) != ident:  # replaced by a newer file meanwhile: keep that one
                return
            try:
                path.unlink()
            except OSError as exc:
                logger.debug("disk KV store: cannot remove %s: %s", path, exc)
                return
            self._forget(path.name)
            self._bump_stamp()

    def _write_file(self, tmp: Path, head: bytes, pieces: list[np.ndarray], offsets: list[int],
                    payload_len: int) -> None:
        h = hmac.new(self.secret, head[:_DIGEST_AT], hashlib.sha256)
        h.update(head[_FIXED:])
        with open(tmp, "xb") as f:
            f.write(head)
            pos = 0
            for data, offset in zip(pieces, offsets, strict=True):
                if offset > pos:
                    pad = b"\x00" * (offset - pos)
                    f.write(pad)
                    h.update(pad)
                f.write(data)  # numpy arrays expose the buffer protocol: no copy
                h.update(data)
                pos = offset + data.nbytes
            if pos != payload_len:  # pragma: no cover - layout bug guard
                raise AssertionError("payload length mismatch")
            f.seek(_DIGEST_AT)
            f.write(h.digest())
            f.flush()
            now = self._now()  # fine-grained recency (the kernel's file clock ticks in milliseconds)
            os.utime(f.fileno(), ns=(now, now))
            if self.durable:
                os.fsync(f.fileno())


def check_cache_dir(root: str | os.PathLike[str]) -> None:
    """CacheDirError (one line) when `root` or the nearest part of it that exists is not a folder."""
    path = Path(root).expanduser()
    for p in (path, *path.parents):
        if p.exists():
            if not p.is_dir():
                what = "is a file" if p == path else f"lies under {p}, which is a file"
                raise CacheDirError(f"disk cache folder {path} {what}, not a folder")
            return


def _check_key(key: str) -> None:
    if not isinstance(key, str) or not KEY_RE.fullmatch(key):
        raise ValueError(f"block key must be 16-128 lowercase hex characters, got {key!r}")


def _scandir(path: Path) -> list[os.DirEntry]:
    try:
        with os.scandir(path) as it:
            return list(it)
    except OSError:
        return []


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
