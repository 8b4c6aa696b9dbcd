"""The cold KV tier: HostStore (LRU under a byte cap), DiskStore (checked, atomic, content-addressed
block files that survive restarts and reject anything bad), and ColdTier over both."""

from __future__ import annotations

import logging
import os
import re
import struct
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from engine.kv.cold.disk_store import MAGIC, BlockEntry, DiskStore
from engine.kv.cold.host_store import HostStore
from engine.kv.cold.tier import ColdTier

ROOT = Path(__file__).resolve().parents[3]
FP = "f" * 64
OTHER_FP = "e" * 64


def key_of(i: int) -> str:
    return f"{i:064x}"


def tensors(seed: int, numel: int = 256) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return {
        "k": torch.randn(numel // 16, 16, generator=g).to(torch.bfloat16),
        "v": torch.randn(numel // 16, 16, generator=g),
        "q": torch.randint(-128, 128, (numel,), generator=g, dtype=torch.int8),
    }


def same(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    return a.keys() == b.keys() and all(a[n].dtype == b[n].dtype and torch.equal(a[n], b[n]) for n in a)


def disk_bytes(root: Path) -> int:
    """Bytes of every file in the store tree except the lock file and the secret."""
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file() and p.name not in (".lock", ".secret"))


# -- HostStore ------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int8])
def test_host_round_trip_copies(dtype):
    src = {"k": (torch.arange(24).reshape(2, 3, 4) - 12).to(dtype), "v": torch.ones(5, dtype=dtype).t()}
    host = HostStore(1 << 20)
    assert host.put(key_of(1), [5, 6, 7], src, meta={"layer_group": 0})
    expected = {n: t.clone() for n, t in src.items()}
    src["k"].zero_()  # the store holds its own copy
    entry = host.get(key_of(1))
    assert same(entry.tensors, expected)
    assert entry.tokens == [5, 6, 7] and entry.meta == {"layer_group": 0}
    assert all(t.is_contiguous() and t.device.type == "cpu" for t in entry.tensors.values())
    assert host.get(key_of(2)) is None
    assert host.stats()["hits"] == 1 and host.stats()["misses"] == 1


def test_host_lru_eviction_under_capacity():
    one = HostStore(1 << 20)
    one.put(key_of(0), [1] * 16, tensors(0))
    size = one.bytes_used
    evicted = []
    host = HostStore(3 * size + size // 2, on_evict=lambda k, e: evicted.append((k, e.tokens[0])))
    for i in range(3):
        assert host.put(key_of(i), [i] * 16, tensors(i))
    assert host.bytes_used == 3 * size
    host.get(key_of(0))  # 0 is now the most recent: 1 goes first
    assert host.put(key_of(3), [3] * 16, tensors(3))
    assert evicted == [(key_of(1), 1)]
    assert host.keys() == [key_of(2), key_of(0), key_of(3)]
    for i in range(4, 40):
        assert host.put(key_of(i), [i] * 16, tensors(i))
        assert host.bytes_used <= host.capacity_bytes and len(host) == 3
    assert host.stats()["evictions"] == 37
    # overwrite: accounting stays exact, no eviction callback for the replaced entry
    n_evicted = len(evicted)
    host.put(key_of(39), [39] * 16, tensors(99))
    assert host.bytes_used == 3 * size and len(evicted) == n_evicted
    assert same(host.get(key_of(39)).tensors, tensors(99))


def test_host_refuses_entry_larger_than_capacity():
    host = HostStore(4096)
    assert host.put(key_of(1), [1], {"x": torch.zeros(100)})
    assert not host.put(key_of(2), [2], {"x": torch.zeros(2000)})  # 8000 bytes
    assert host.contains(key_of(1)) and not host.contains(key_of(2))
    assert host.stats()["rejected_too_large"] == 1


def test_host_on_evict_failure_is_logged_not_raised(caplog):
    def boom(key, entry):
        raise OSError("disk full")

    host = HostStore(1000, on_evict=boom)
    host.put(key_of(1), [1], {"x": torch.zeros(200)})
    with caplog.at_level(logging.WARNING, logger="engine.kv.cold.host_store"):
        assert host.put(key_of(2), [2], {"x": torch.zeros(200)})
    assert "disk full" in caplog.text and list(host.keys()) == [key_of(2)]


def test_host_meta_must_be_json():
    with pytest.raises(TypeError):
        HostStore(1 << 20).put(key_of(1), [1], {"x": torch.zeros(1)}, meta={"bad": object()})


# -- DiskStore: round trip, eviction, capacity ------------------------------------------------------


@pytest.mark.parametrize(
    "t",
    [
        torch.randn(3, 5, 7),
        torch.randn(4, 8).to(torch.bfloat16),
        torch.randint(-128, 128, (33,), dtype=torch.int8),
        torch.randn(6).half(),
        torch.tensor([True, False, True]),
        torch.arange(-5, 5, dtype=torch.int64),
        torch.tensor(2.5),  # 0-dim
        torch.zeros(0, 4),  # empty
        torch.randn(8, 6)[:, ::2],  # not contiguous
    ],
    ids=["f32", "bf16", "i8", "f16", "bool", "i64", "scalar", "empty", "strided"],
)
def test_disk_round_trip(tmp_path, t):
    store = DiskStore(tmp_path, 1 << 20)
    toks = list(range(100, 116))
    assert store.put(key_of(7), toks, {"a": t, "b": torch.ones(3)}, fingerprint=FP, meta={"n": 1, "s": "x"})
    entry = store.get(key_of(7), tokens=toks, fingerprint=FP)
    assert isinstance(entry, BlockEntry)
    got = entry.tensors["a"]
    assert got.dtype == t.dtype and got.shape == t.shape and torch.equal(got, t)
    assert entry.tokens == toks and entry.meta == {"n": 1, "s": "x"} and entry.fingerprint == FP
    # copied out of the mapping: the file can go while the tensors live on
    store.discard(key_of(7))
    assert not store.path_for(key_of(7)).exists() and torch.equal(got, t)
    assert store.get(key_of(7), tokens=toks, fingerprint=FP) is None


def test_disk_file_layout_is_aligned_and_sharded(tmp_path):
    store = DiskStore(tmp_path, 1 << 20)
    store.put(key_of(0xAB), [1, 2], {"x": torch.arange(10, dtype=torch.int32)}, fingerprint=FP)
    path = tmp_path / key_of(0xAB)[:2] / key_of(0xAB)
    raw = path.read_bytes()
    assert raw[:8] == MAGIC and store.path_for(key_of(0xAB)) == path
    _, version, _, header_len, payload_len = struct.unpack_from("<8sIIQQ", raw)
    payload_at = (64 + header_len + 63) // 64 * 64
    assert version == 2 and len(raw) == payload_at + payload_len and payload_at % 64 == 0
    assert raw[payload_at : payload_at + 40] == torch.arange(10, dtype=torch.int32).numpy().tobytes()
    assert b"pickle" not in raw and raw[64 : 64 + header_len].startswith(b"{")


def test_disk_bad_keys_raise(tmp_path):
    store = DiskStore(tmp_path, 1 << 20)
    for bad in ["../../etc/passwd", "ABCDEF0123456789", "short", key_of(1) + "/x"]:
        with pytest.raises(ValueError):
            store.get(bad, tokens=[1], fingerprint=FP)
    with pytest.raises(ValueError):
        store.put(key_of(1), [2**31], {"x": torch.zeros(1)}, fingerprint=FP)  # token outside int32


def test_disk_lru_eviction_and_capacity(tmp_path):
    probe = DiskStore(tmp_path / "probe", 1 << 20)
    probe.put(key_of(0), [0] * 16, tensors(0), fingerprint=FP)
    size = probe.bytes_used
    store = DiskStore(tmp_path / "s", 3 * size + size // 2)
    for i in range(3):
        assert store.put(key_of(i), [i] * 16, tensors(i), fingerprint=FP)
    assert store.get(key_of(0), tokens=[0] * 16, fingerprint=FP) is not None  # 0 now most recent
    assert store.put(key_of(3), [3] * 16, tensors(3), fingerprint=FP)
    assert not store.contains(key_of(1))
    assert [store.contains(key_of(i)) for i in (0, 2, 3)] == [True, True, True]
    assert store.stats()["evictions"] == 1 and disk_bytes(store.root) == 3 * size


def test_disk_capacity_never_exceeded_over_many_puts(tmp_path):
    cap = 40_000
    store = DiskStore(tmp_path, cap)
    g = torch.Generator().manual_seed(0)
    for i in range(150):
        numel = int(torch.randint(1, 3000, (1,), generator=g))
        ok = store.put(key_of(i % 60), [i], {"x": torch.randn(numel, generator=g)}, fingerprint=FP)
        assert ok  # every entry fits on its own (<= 12 kB + header)
        assert store.bytes_used <= cap and disk_bytes(tmp_path) == store.bytes_used
    assert not store.put(key_of(999), [1], {"x": torch.zeros(cap // 4)}, fingerprint=FP)
    assert store.stats()["rejected_too_large"] >= 1
    # a new instance with a smaller cap shrinks the store to it
    small = DiskStore(tmp_path, cap // 4)
    assert small.bytes_used <= cap // 4 and disk_bytes(tmp_path) == small.bytes_used


# -- DiskStore: bad files are detected, logged once, removed, never used --------------------------


def _flip(path: Path, offset_from_end: int) -> None:
    raw = bytearray(path.read_bytes())
    raw[-offset_from_end] ^= 0x01
    path.write_bytes(bytes(raw))


def _set_version(path: Path, version: int) -> None:
    raw = bytearray(path.read_bytes())
    raw[8:12] = struct.pack("<I", version)
    path.write_bytes(bytes(raw))


def _forge(path: Path, old: bytes, new: bytes) -> None:
    """Edit the header and recompute the checksum: a sound-looking file whose content lies."""
    import hashlib

    raw = bytearray(path.read_bytes())
    at = raw.index(old)
    raw[at : at + len(old)] = new
    raw[32:64] = hashlib.sha256(bytes(raw[:32]) + bytes(raw[64:])).digest()
    path.write_bytes(bytes(raw))


BAD_FILES = {
    "payload-bit": (lambda p: _flip(p, 5), "checksum mismatch"),
    # the header is parsed (and its table checked against the sizes) before the keyed checksum
    "header-bit": (lambda p: _flip(p, p.stat().st_size - 70), "checksum mismatch|header is not JSON"),
    "truncated": (lambda p: p.write_bytes(p.read_bytes()[:-100]), "truncated"),
    "truncated-tiny": (lambda p: p.write_bytes(p.read_bytes()[:20]), "truncated"),
    "empty": (lambda p: p.write_bytes(b""), "truncated"),
    "extended": (lambda p: p.write_bytes(p.read_bytes() + b"\0"), "truncated or extended"),
    "wrong-magic": (lambda p: p.write_bytes(b"GGUF" + p.read_bytes()[4:]), "wrong magic"),
    "wrong-version": (lambda p: _set_version(p, 3), "format version 3"),
    "foreign": (lambda p: p.write_bytes(b"PK\x03\x04" + os.urandom(4000)), "wrong magic"),
    "forged-extent": (lambda p: _forge(p, b'"nbytes":512', b'"nbytes":999'), "extent does not match"),
    "forged-dtype": (lambda p: _forge(p, b'"bfloat16"', b'"objectxx"'), "unknown dtype"),
    "forged-header": (lambda p: _forge(p, b'"tokens":[', b'"tokens":{'), "header is not JSON"),
}


@pytest.mark.parametrize("case", list(BAD_FILES))
def test_disk_bad_file_rejected_removed_logged_once(tmp_path, caplog, case):
    damage, reason = BAD_FILES[case]
    store = DiskStore(tmp_path, 1 << 20)
    toks = [9] * 16
    store.put(key_of(5), toks, tensors(5), fingerprint=FP)
    path = store.path_for(key_of(5))
    damage(path)
    with caplog.at_level(logging.WARNING, logger="engine.kv.cold.disk_store"):
        assert store.get(key_of(5), tokens=toks, fingerprint=FP) is None
        assert store.get(key_of(5), tokens=toks, fingerprint=FP) is None  # now a plain miss
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert path.name in warnings[0].getMessage() and re.search(reason, warnings[0].getMessage())
    assert not path.exists()
    stats = store.stats()
    assert stats["rejected_corrupt"] == 1 and stats["entries"] == 0 and stats["bytes"] == 0


@pytest.mark.parametrize("case", ["fingerprint", "tokens", "token-count", "key"])
def test_disk_entry_for_other_model_tokens_or_key_rejected(tmp_path, caplog, case):
    store = DiskStore(tmp_path, 1 << 20)
    toks = list(range(16))
    if case == "key":  # a sound file copied under another key's name
        store.put(key_of(1), toks, tensors(1), fingerprint=FP)
        store.path_for(key_of(2)).write_bytes(store.path_for(key_of(1)).read_bytes())
        key, want_toks, want_fp, reason = key_of(2), toks, FP, "written for key"
    else:
        store.put(key_of(2), toks, tensors(1), fingerprint=FP)
        key, want_toks, want_fp, reason = {
            "fingerprint": (key_of(2), toks, OTHER_FP, "another model fingerprint"),
            "tokens": (key_of(2), toks[:-1] + [99], FP, "token ids differ"),
            "token-count": (key_of(2), toks + [16], FP, "token ids differ"),
        }[case]
    with caplog.at_level(logging.WARNING, logger="engine.kv.cold.disk_store"):
        assert store.get(key, tokens=want_toks, fingerprint=want_fp) is None
    assert reason in caplog.text and key in caplog.text
    assert not store.path_for(key).exists()
    assert store.stats()["rejected_mismatch"] == 1


def test_disk_leftover_temp_file_ignored_and_cleaned(tmp_path):
    store = DiskStore(tmp_path, 1 << 20)
    store.put(key_of(1), [1], tensors(1), fingerprint=FP)
    full = store.path_for(key_of(1)).read_bytes()
    # a writer that died between writing its temp file and renaming it
    tmp = store.path_for(key_of(2)).parent / f".{key_of(2)}.4242.deadbeef.tmp"
    tmp.parent.mkdir(exist_ok=True)
    tmp.write_bytes(full[: len(full) // 2])
    assert store.get(key_of(2), tokens=[1], fingerprint=FP) is None
    assert not store.contains(key_of(2))
    again = DiskStore(tmp_path, 1 << 20)
    assert not tmp.exists() and again.stats()["temps_removed"] == 1
    assert again.keys() == [key_of(1)] and again.bytes_used == len(full)


def test_disk_failed_write_keeps_old_entry_and_leaves_no_temp(tmp_path, monkeypatch, caplog):
    store = DiskStore(tmp_path, 1 << 20)
    store.put(key_of(1), [1], tensors(1), fingerprint=FP)

    def failing_replace(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", failing_replace)
    with caplog.at_level(logging.WARNING, logger="engine.kv.cold.disk_store"):
        assert not store.put(key_of(1), [1], tensors(2), fingerprint=FP)
    monkeypatch.undo()
    assert "No space left" in caplog.text and store.stats()["write_errors"] == 1
    assert [p.name for p in store.path_for(key_of(1)).parent.iterdir()] == [key_of(1)]
    assert same(store.get(key_of(1), tokens=[1], fingerprint=FP).tensors, tensors(1))


def test_disk_recency_survives_restart(tmp_path):
    probe = DiskStore(tmp_path / "probe", 1 << 20)
    probe.put(key_of(0), [0], tensors(0), fingerprint=FP)
    size = probe.bytes_used
    store = DiskStore(tmp_path / "s", 3 * size)
    for i in range(3):
        store.put(key_of(i), [i], tensors(i), fingerprint=FP)
    store.get(key_of(0), tokens=[0], fingerprint=FP)
    store.close()
    again = DiskStore(tmp_path / "s", 3 * size)
    assert again.keys() == [key_of(1), key_of(2), key_of(0)] and again.bytes_used == 3 * size
    again.put(key_of(3), [3], tensors(3), fingerprint=FP)
    assert not again.contains(key_of(1)) and again.contains(key_of(0))


# -- DiskStore across processes -------------------------------------------------------------------

_CHILD_PRELUDE = f"""
import os, sys, torch
sys.path.insert(0, {str(ROOT)!r})
from engine.kv.cold.disk_store import DiskStore
def key_of(i): return f"{{i:064x}}"
def tensors(seed, numel=256):
    g = torch.Generator().manual_seed(seed)
    return {{"k": torch.randn(numel // 16, 16, generator=g).to(torch.bfloat16),
             "v": torch.randn(numel // 16, 16, generator=g),
             "q": torch.randint(-128, 128, (numel,), generator=g, dtype=torch.int8)}}
FP = {FP!r}
"""


def _run_child(body: str, *args: str) -> subprocess.Popen:
    code = _CHILD_PRELUDE + textwrap.dedent(body)
    return subprocess.Popen([sys.executable, "-c", code, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def test_disk_written_by_one_process_read_by_another_after_a_crash(tmp_path):
    child = _run_child(
        """
        store = DiskStore(sys.argv[1], 1 << 20)
        for i in range(3):
            assert store.put(key_of(i), [i] * 16, tensors(i), fingerprint=FP, meta={"i": i})
        os.fsync = lambda fd: os._exit(3)  # crash while writing the fourth entry, before its rename
        store.put(key_of(3), [3] * 16, tensors(3), fingerprint=FP)
        """,
        str(tmp_path),
    )
    out, err = child.communicate(timeout=120)
    assert child.returncode == 3, err
    temps = list(tmp_path.rglob(".*.tmp"))
    assert len(temps) == 1  # the crashed write left its temp file, never a final file
    store = DiskStore(tmp_path, 1 << 20)
    assert not temps[0].exists() and store.stats()["temps_removed"] == 1
    assert sorted(store.keys()) == [key_of(i) for i in range(3)]
    for i in range(3):
        entry = store.get(key_of(i), tokens=[i] * 16, fingerprint=FP)
        assert entry is not None and same(entry.tensors, tensors(i)) and entry.meta == {"i": i}
    assert store.get(key_of(3), tokens=[3] * 16, fingerprint=FP) is None


def test_disk_two_processes_writing_same_keys(tmp_path):
    probe = DiskStore(tmp_path / "probe", 1 << 20)
    probe.put(key_of(0), [0] * 16, tensors(0), fingerprint=FP, meta={"w": 0})
    size = probe.bytes_used
    cap = 6 * size
    body = """
        store = DiskStore(sys.argv[1], int(sys.argv[2]))
        w = int(sys.argv[3])
        for r in range(15):
            assert store.put(key_of(0), [0] * 16, tensors(w), fingerprint=FP, meta={"w": w})
            store.put(key_of(100 * w + r), [r] * 16, tensors(r), fingerprint=FP, meta={"w": w})
            store.get(key_of(0), tokens=[0] * 16, fingerprint=FP)
        """
    children = [_run_child(body, str(tmp_path / "s"), str(cap), str(w)) for w in (1, 2)]
    for child in children:
        _, err = child.communicate(timeout=180)
        assert child.returncode == 0, err
    store = DiskStore(tmp_path / "s", cap)
    assert disk_bytes(tmp_path / "s") == store.bytes_used <= cap
    assert not list((tmp_path / "s").rglob(".*.tmp"))
    entry = store.get(key_of(0), tokens=[0] * 16, fingerprint=FP)
    assert entry is not None and entry.meta["w"] in (1, 2)
    assert same(entry.tensors, tensors(entry.meta["w"]))
    assert store.stats()["rejected_corrupt"] == 0


# -- ColdTier -------------------------------------------------------------------------------------


def test_cold_tier_host_then_disk_with_promotion_and_spill(tmp_path):
    one = HostStore(1 << 20)
    one.put(key_of(0), [0] * 16, tensors(0), meta={"i": 0})
    size = one.bytes_used
    host = HostStore(2 * size)
    disk = DiskStore(tmp_path, 1 << 20)
    tier = ColdTier(host, disk, spill_evicted=True)
    for i in range(3):
        assert tier.put(key_of(i), [i] * 16, tensors(i), fingerprint=FP, meta={"i": i})
    assert tier.contains(key_of(0)) == "disk" and tier.spills == 1  # evicted from host, spilled
    assert disk.keys() == [key_of(0)]
    entry = tier.get(key_of(0), tokens=[0] * 16, fingerprint=FP)
    assert entry is not None and same(entry.tensors, tensors(0)) and entry.meta == {"i": 0}
    assert tier.disk_hits == 1 and host.contains(key_of(0))  # promoted
    assert tier.get(key_of(0), tokens=[0] * 16, fingerprint=FP) is entry and tier.host_hits == 1
    assert host.contains(key_of(0)) and not host.contains(key_of(1))  # promotion evicted 1 ...
    assert disk.contains(key_of(1))  # ... which was spilled
    assert tier.get(key_of(9), tokens=[9] * 16, fingerprint=FP) is None and tier.misses == 1


def test_cold_tier_persist_and_write_through(tmp_path):
    disk = DiskStore(tmp_path, 1 << 20)
    tier = ColdTier(HostStore(1 << 20), disk)
    tier.put(key_of(1), [1], tensors(1), fingerprint=FP)
    assert not disk.contains(key_of(1))
    tier.put(key_of(2), [2], tensors(2), fingerprint=FP, persist=True)
    assert disk.contains(key_of(2))
    through = ColdTier(HostStore(1 << 20), disk, write_through=True)
    through.put(key_of(3), [3], tensors(3), fingerprint=FP)
    assert disk.contains(key_of(3))
    through.put(key_of(4), [4], tensors(4), fingerprint=FP, persist=False)
    assert not disk.contains(key_of(4))
    disk_only = ColdTier(None, disk)
    disk_only.put(key_of(5), [5], tensors(5), fingerprint=FP)
    assert same(disk_only.get(key_of(5), tokens=[5], fingerprint=FP).tensors, tensors(5))


def test_cold_tier_checks_tokens_and_fingerprint_in_host_memory_too(tmp_path, caplog):
    tier = ColdTier(HostStore(1 << 20), None)
    tier.put(key_of(1), [1, 2, 3], tensors(1), fingerprint=FP)
    with caplog.at_level(logging.WARNING, logger="engine.kv.cold.tier"):
        assert tier.get(key_of(1), tokens=[1, 2, 4], fingerprint=FP) is None
    assert tier.host_mismatches == 1 and not tier.host.contains(key_of(1)) and key_of(1) in caplog.text
    tier.put(key_of(1), [1, 2, 3], tensors(1), fingerprint=FP)
    assert tier.get(key_of(1), tokens=[1, 2, 3], fingerprint=OTHER_FP) is None
    assert tier.get(key_of(1), tokens=[1, 2, 3], fingerprint=FP) is None  # dropped by the mismatch


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_pinned_host_copies_from_device(tmp_path):
    src = {n: t.cuda() for n, t in tensors(1).items()}
    host = HostStore(1 << 20, pin=True)
    host.put(key_of(1), [1], src)
    entry = host.get(key_of(1))
    assert all(t.is_pinned() and t.device.type == "cpu" for t in entry.tensors.values())
    assert same(entry.tensors, tensors(1))
    disk = DiskStore(tmp_path, 1 << 20)
    tier = ColdTier(host, disk)
    tier.put(key_of(2), [2], src, fingerprint=FP, persist=True)
    host.clear()
    got = tier.get(key_of(2), tokens=[2], fingerprint=FP)
    assert all(t.is_pinned() for t in got.tensors.values()) and same(got.tensors, tensors(1))
