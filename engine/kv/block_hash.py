"""Content addresses for KV blocks: a model fingerprint, chained block hashes over token ids, and a
cheap digest of a model's weight files.

A block of KV is only reusable by the same model, in the same KV dtype, after exactly the same
tokens at exactly the same positions. The key of a block therefore chains everything before it:

    root    = H("longdoc-prefix-v1" | fingerprint | block_size)     (or a caller's `parent` hash)
    hash[i] = H(hash[i-1] | int32-LE token ids of block i)

so two prompts share the hashes of their common full blocks and differ from the first block in
which one token differs onwards. H is SHA-256 (hashlib; SHA-NI makes it the fastest of hashlib's
hashes on x86, about twice BLAKE2b here). Only full blocks get a hash: a partial block's KV is
still growing and is never stored.

`model_fingerprint` covers what changes the KV a model writes: the architecture and every
`ModelConfig` field that shapes the computation up to the last layer's keys and values (layers,
heads, head_dim, per-layer RoPE and windows, norms, activations, ...), the weights digest and the
KV dtype. Fields that cannot change the KV (name, BOS/EOS/pad ids, the final logit softcap) are left
out; anything else is in, since a false miss costs one recompute and a false hit a wrong answer.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import struct
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import torch

from engine.model.config import ModelConfig

HASH_NAME = "sha256"
DIGEST_HEX_LEN = 64
_CHAIN_DOMAIN = b"longdoc-prefix-v1\x00"
_FINGERPRINT_VERSION = 1
# ModelConfig fields that do not change any key or value the model writes.
_NOT_KV_FIELDS = frozenset({"name", "bos_token_id", "eos_token_ids", "pad_token_id", "final_softcap"})
WEIGHT_SUFFIXES = (".gguf", ".safetensors", ".bin", ".pt", ".pth")
_EDGE = 1 << 20  # first and last MiB of each weight file
_INTERIOR_SAMPLES = 8
_INTERIOR_LEN = 64 << 10


def encode_tokens(token_ids: Iterable[int]) -> bytes:
    """Canonical bytes of token ids: little-endian int32, no header. ValueError outside int32."""
    ids = token_ids.tolist() if isinstance(token_ids, torch.Tensor) else list(token_ids)
    try:
        return struct.pack(f"<{len(ids)}i", *ids)
    except struct.error as exc:
        raise ValueError(f"token ids must be int32 integers: {exc}") from exc


def decode_tokens(data: bytes) -> list[int]:
    """Inverse of `encode_tokens`."""
    if len(data) % 4:
        raise ValueError(f"token bytes length {len(data)} is not a multiple of 4")
    return list(struct.unpack(f"<{len(data) // 4}i", data))


def _canonical(obj: Any) -> Any:
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: _canonical(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, Mapping):
        return {str(k): _canonical(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_canonical(v) for v in obj]
    if isinstance(obj, torch.dtype):
        return str(obj).removeprefix("torch.")
    if obj is None or isinstance(obj, bool | int | float | str):
        return obj
    raise TypeError(f"cannot fingerprint a value of type {type(obj).__name__}")


def model_fingerprint(
    config: ModelConfig,
    weights_digest: str,
    kv_dtype: torch.dtype | str,
    extra: Mapping[str, Any] | None = None,
) -> str:
    """Hex SHA-256 naming "this model, these weights, KV stored as `kv_dtype`".

    `extra` takes anything else the caller knows changes the KV values, e.g. the compute dtype when
    it differs from the KV dtype or a quantisation scheme of the warm tier: {"compute": "bfloat16"}.
    """
    if not weights_digest:
        raise ValueError("weights_digest is empty")
    fields = {
        f.name: _canonical(getattr(config, f.name))
        for f in dataclasses.fields(config)
        if f.name not in _NOT_KV_FIELDS
    }
    kv = kv_dtype if isinstance(kv_dtype, str) else _canonical(kv_dtype)
    doc = {
        "v": _FINGERPRINT_VERSION,
        "config": fields,
        "weights": weights_digest,
        "kv_dtype": kv,
        "extra": _canonical(dict(extra or {})),
    }
    blob = json.dumps(doc, sort_keys=True, separators=(",", ":"), allow_nan=False).encode()
    return hashlib.sha256(blob).hexdigest()


def chain_root(fingerprint: str, block_size: int) -> str:
    """The hash every chain starts from: the fingerprint and the block size."""
    if block_size <= 0:
        raise ValueError("block_size must be positive")
    h = hashlib.sha256(_CHAIN_DOMAIN)
    h.update(fingerprint.encode())
    h.update(b"\x00")
    h.update(struct.pack("<I", block_size))
    return h.hexdigest()


def chain_block_hashes(
    token_ids: Sequence[int],
    block_size: int,
    fingerprint: str,
    parent: str | None = None,
) -> list[str]:
    """Hex hashes of the full blocks of `token_ids`, each chaining the one before.

    `parent` continues a chain (the hash of the block just before `token_ids[0]`); without it the
    chain starts at `chain_root(fingerprint, block_size)`. A trailing partial block gets no hash.
    """
    prev = bytes.fromhex(parent) if parent is not None else bytes.fromhex(chain_root(fingerprint, block_size))
    if len(prev) != 32:
        raise ValueError("parent must be a 64-character hex hash")
    data = encode_tokens(token_ids)
    step = 4 * block_size
    out: list[str] = []
    for start in range(0, len(data) - step + 1, step):
        h = hashlib.sha256(prev)
        h.update(data[start : start + step])
        prev = h.digest()
        out.append(prev.hex())
    return out


def _weight_files(path: Path) -> list[Path]:
    if path.is_file():
        return [path]
    if path.is_dir():
        files = sorted(p for p in path.rglob("*") if p.is_file() and p.suffix in WEIGHT_SUFFIXES)
        if files:
            return files
        raise FileNotFoundError(f"no weight files ({', '.join(WEIGHT_SUFFIXES)}) under {path}")
    raise FileNotFoundError(f"no model file or folder at {path}")


def weights_digest(path: str | os.PathLike[str]) -> str:
    """Cheap hex digest of a model file, or of the weight files of a model folder.

    Per file (sorted by path relative to the folder): its relative name, size, mtime (ns), the first
    and last MiB, and 8 samples of 64 KiB at evenly spaced offsets in between. Not the whole file:
    hashing 250 MB (the packaged Gemma 3 270M) to 16 GB (an 8B model in bf16) at every load would
    cost from a fraction of a second to about ten seconds of reading and hashing, for a key whose
    job is only to tell different weight files apart. The size and mtime catch a file rewritten in
    place; the head (GGUF metadata, safetensors header), tail and samples catch a different file of
    the same size copied in. What it cannot see: a change confined to unsampled bytes with the
    size and mtime preserved (e.g. `touch -r` after patching a weight by hand).
    """
    root = Path(path)
    files = _weight_files(root)
    h = hashlib.sha256(b"longdoc-weights-v1\x00")
    for file in files:
        st = file.stat()
        rel = file.name if file == root else file.relative_to(root).as_posix()
        h.update(f"{rel}\x00{st.st_size}\x00{st.st_mtime_ns}\x00".encode())
        with open(file, "rb") as f:
            size = st.st_size
            if size <= 2 * _EDGE + _INTERIOR_SAMPLES * _INTERIOR_LEN:
                h.update(f.read())
                continue
            h.update(f.read(_EDGE))
            span = size - 2 * _EDGE - _INTERIOR_LEN
            for i in range(1, _INTERIOR_SAMPLES + 1):
                f.seek(_EDGE + span * i // (_INTERIOR_SAMPLES + 1))
                h.update(f.read(_INTERIOR_LEN))
            f.seek(size - _EDGE)
            h.update(f.read(_EDGE))
    return h.hexdigest()
