"""Prefix hashes: the chained block hashes, the model fingerprint and the cheap weights digest."""

from __future__ import annotations

import dataclasses
import hashlib
import os
import struct

import pytest
import torch

from engine.kv.block_hash import (
    chain_block_hashes,
    chain_root,
    decode_tokens,
    encode_tokens,
    model_fingerprint,
    weights_digest,
)
from engine.model.config import ModelConfig
from engine.model.rope import RopeConfig

FP = "a" * 64


def test_token_encoding_is_int32_little_endian():
    assert encode_tokens([1, 258, -1]) == b"\x01\x00\x00\x00\x02\x01\x00\x00\xff\xff\xff\xff"
    assert encode_tokens(torch.tensor([7, 8])) == encode_tokens([7, 8])
    assert decode_tokens(encode_tokens([0, 2**31 - 1, 5])) == [0, 2**31 - 1, 5]
    with pytest.raises(ValueError):
        encode_tokens([2**31])
    with pytest.raises(ValueError):
        decode_tokens(b"abc")


def test_chain_matches_its_definition():
    toks = list(range(40))
    root = hashlib.sha256(b"longdoc-prefix-v1\x00" + FP.encode() + b"\x00" + struct.pack("<I", 16)).digest()
    h1 = hashlib.sha256(root + struct.pack("<16i", *toks[:16])).digest()
    h2 = hashlib.sha256(h1 + struct.pack("<16i", *toks[16:32])).digest()
    assert chain_root(FP, 16) == root.hex()
    assert chain_block_hashes(toks, 16, FP) == [h1.hex(), h2.hex()]  # the partial third block: no hash


def test_chain_shared_prefix_and_single_token_change():
    base = list(range(1000, 1100))  # 6 full blocks of 16, 4 tokens left over
    hashes = chain_block_hashes(base, 16, FP)
    assert len(hashes) == 6 and len(set(hashes)) == 6
    assert chain_block_hashes(base[:64] + [1, 2, 3] * 20, 16, FP)[:4] == hashes[:4]  # same prefix
    assert chain_block_hashes(base[:15], 16, FP) == []
    for block in (0, 2, 5):
        changed = list(base)
        changed[block * 16 + 7] += 1
        other = chain_block_hashes(changed, 16, FP)
        assert other[:block] == hashes[:block]
        assert all(a != b for a, b in zip(other[block:], hashes[block:], strict=True))
    # a change in the leftover partial block changes no hash
    tail = list(base)
    tail[-1] += 1
    assert chain_block_hashes(tail, 16, FP) == hashes


def test_chain_fingerprint_block_size_and_parent():
    toks = list(range(64))
    hashes = chain_block_hashes(toks, 16, FP)
    other = chain_block_hashes(toks, 16, "b" * 64)
    assert all(a != b for a, b in zip(hashes, other, strict=True))
    assert not set(chain_block_hashes(toks, 32, FP)) & set(hashes)
    assert chain_block_hashes(toks[32:], 16, FP, parent=hashes[1]) == hashes[2:]  # continue a chain
    # the same tokens at another position (after other blocks) hash differently
    assert chain_block_hashes(toks[16:32], 16, FP)[0] != hashes[1]


def tiny_config(**changes) -> ModelConfig:
    cfg = ModelConfig(
        architecture="gemma3", vocab_size=256, hidden_size=64, intermediate_size=128, num_layers=4,
        num_heads=4, num_kv_heads=2, head_dim=16, rms_norm_eps=1e-6, max_position_embeddings=2048,
        layer_windows=[512, 512, 512, None],
        layer_ropes=[RopeConfig(theta=10000.0)] * 3 + [RopeConfig(theta=1e6)],
        attn_scale=0.25, qk_norm=True, sandwich_norms=True, gemma_norm=True, embed_scale=8.0,
        hidden_act="gelu_tanh", eos_token_ids=[1], bos_token_id=2, name="tiny",
    )
    return dataclasses.replace(cfg, **changes)


def test_fingerprint_covers_what_changes_the_kv():
    base = model_fingerprint(tiny_config(), "w" * 64, torch.float32)
    assert base == model_fingerprint(tiny_config(), "w" * 64, "float32")  # deterministic, dtype by name
    assert len(base) == 64 and int(base, 16) >= 0
    changed = {
        "layers": tiny_config(num_layers=5),
        "heads": tiny_config(num_heads=8),
        "kv heads": tiny_config(num_kv_heads=4),
        "head_dim": tiny_config(head_dim=32),
        "window": tiny_config(layer_windows=[1024, 512, 512, None]),
        "rope theta": tiny_config(layer_ropes=[RopeConfig(theta=10000.0)] * 3 + [RopeConfig(theta=5e5)]),
        "rope scaling": tiny_config(
            layer_ropes=[RopeConfig(theta=10000.0)] * 3 + [RopeConfig(theta=1e6, rope_type="linear", factor=8.0)]
        ),
        "architecture": tiny_config(architecture="llama"),
        "norm eps": tiny_config(rms_norm_eps=1e-5),
        "max positions": tiny_config(max_position_embeddings=4096),
    }
    prints = {name: model_fingerprint(cfg, "w" * 64, torch.float32) for name, cfg in changed.items()}
    prints["weights"] = model_fingerprint(tiny_config(), "x" * 64, torch.float32)
    prints["kv dtype"] = model_fingerprint(tiny_config(), "w" * 64, torch.bfloat16)
    prints["extra"] = model_fingerprint(tiny_config(), "w" * 64, torch.float32, {"compute": "bfloat16"})
    assert base not in prints.values() and len(set(prints.values())) == len(prints)
    # fields that cannot change the KV leave it alone
    same = tiny_config(name="renamed", eos_token_ids=[1, 106], bos_token_id=5, final_softcap=30.0)
    assert model_fingerprint(same, "w" * 64, torch.float32) == base
    with pytest.raises(ValueError):
        model_fingerprint(tiny_config(), "", torch.float32)


def _write(path, data: bytes) -> None:
    path.write_bytes(data)
    os.utime(path, ns=(1_700_000_000_000_000_000, 1_700_000_000_000_000_000))


def _patched(path, offset: int) -> bytes:
    raw = bytearray(path.read_bytes())
    raw[offset] ^= 0xFF
    return bytes(raw)


def test_weights_digest_of_a_file(tmp_path):
    f = tmp_path / "model.gguf"
    data = os.urandom(8 << 20)
    _write(f, data)
    base = weights_digest(f)
    assert weights_digest(f) == base and weights_digest(str(f)) == base and len(base) == 64
    for offset in (10, len(data) - 10, (1 << 20) + ((len(data) - (2 << 20) - (64 << 10)) * 3 // 9) + 5):
        _write(f, _patched(f, offset))  # first MiB, last MiB, inside an interior sample; mtime kept
        assert weights_digest(f) != base, offset
        _write(f, data)
    assert weights_digest(f) == base
    os.utime(f, ns=(1_800_000_000_000_000_000,) * 2)  # same bytes, rewritten later
    assert weights_digest(f) != base
    _write(f, data)
    # the documented blind spot: an unsampled byte changed with size and mtime preserved
    _write(f, _patched(f, 4 << 20))
    assert weights_digest(f) == base
    _write(f, data + b"\0")
    assert weights_digest(f) != base


def test_weights_digest_of_a_folder(tmp_path):
    (tmp_path / "sub").mkdir()
    _write(tmp_path / "model-00001.safetensors", b"a" * 1000)
    _write(tmp_path / "sub" / "model-00002.safetensors", b"b" * 1000)
    _write(tmp_path / "config.json", b"{}")
    base = weights_digest(tmp_path)
    _write(tmp_path / "config.json", b'{"x": 1}')  # not a weight file (the config is fingerprinted itself)
    assert weights_digest(tmp_path) == base
    _write(tmp_path / "sub" / "model-00002.safetensors", b"b" * 999 + b"c")
    assert weights_digest(tmp_path) != base
    with pytest.raises(FileNotFoundError):
        weights_digest(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError):
        weights_digest(tmp_path / "empty")
