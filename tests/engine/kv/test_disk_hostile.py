"""The disk KV store against whoever can write its folder: entries forged with a recomputed plain
SHA-256, a folder whose key went missing or was copied with it, a 100 GB sparse file, several corrupt entries at once,
a read-only folder, a cache path that is a file. Real files, real permissions."""

from __future__ import annotations

import ctypes
import hashlib
import json
import logging
import os
import stat
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from engine import CacheDirError, EngineError
from engine.kv.cold.disk_store import SECRET_NAME, DiskStore, key_path

FP = "f" * 64
ROOT = Path(__file__).resolve().parents[3]


def key_of(i: int) -> str:
    return f"{i:064x}"


def tensors(seed: int, numel: int = 256) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return {"k": torch.randn(numel, generator=g), "v": torch.randn(numel, generator=g)}


def _resign_sha256(path: Path, edit) -> None:
    """Alter the file's bytes with `edit(bytearray)` and recompute the checksum field the way the
    version-1 format computed it (plain SHA-256 over everything but the field)."""
    raw = bytearray(path.read_bytes())
    edit(raw)
    raw[32:64] = hashlib.sha256(bytes(raw[:32]) + bytes(raw[64:])).digest()
    path.write_bytes(bytes(raw))


def test_altered_tensors_with_recomputed_sha256_are_rejected(tmp_path, caplog):
    store = DiskStore(tmp_path, 1 << 20)
    toks = list(range(16))
    assert store.put(key_of(1), toks, tensors(1), fingerprint=FP)
    path = store.path_for(key_of(1))

    def poison(raw: bytearray) -> None:  # every payload float becomes 1e30 (a garbage answer)
        n = 2 * 256 * 4
        raw[-n:] = struct.pack("<f", 1e30) * (n // 4)

    _resign_sha256(path, poison)
    with caplog.at_level(logging.WARNING, logger="engine.kv.cold.disk_store"):
        assert store.get(key_of(1), tokens=toks, fingerprint=FP) is None
    assert "checksum mismatch" in caplog.text and not path.exists()
    # control: the same store accepts an entry it wrote itself
    assert store.put(key_of(2), toks, tensors(2), fingerprint=FP)
    assert torch.equal(store.get(key_of(2), tokens=toks, fingerprint=FP).tensors["k"], tensors(2)["k"])


def test_key_is_created_private_outside_the_folder_once_and_shared(tmp_path):
    """The key lives in the user's key folder (0700), one 0600 file per cache folder; nothing in the
    cache folder holds it, so whoever can write the folder cannot read it (issue 47)."""
    root = tmp_path / "cache"
    a = DiskStore(root, 1 << 20)
    sec = key_path(root)
    assert not sec.is_relative_to(root) and not (root / SECRET_NAME).exists()
    st = sec.stat()
    assert stat.S_IMODE(st.st_mode) == 0o600 and st.st_size == 32 and a.stats()["new_secret"]
    assert stat.S_IMODE(sec.parent.stat().st_mode) == 0o700
    a.put(key_of(1), [1], tensors(1), fingerprint=FP)
    key = sec.read_bytes()
    assert not any(key in p.read_bytes() for p in root.rglob("*") if p.is_file())
    b = DiskStore(root, 1 << 20)  # a second store (as another process) reads the same key
    assert sec.read_bytes() == key and not b.stats()["new_secret"]
    assert b.get(key_of(1), tokens=[1], fingerprint=FP) is not None
    assert not [p for p in sec.parent.iterdir() if p.name.endswith(".tmp")]  # no temp left


def test_a_copied_cache_folder_is_rejected_and_says_so(tmp_path, caplog):
    """A cache folder copied elsewhere (or handed over) has no key: its entries are dropped with a
    warning naming the reason, never trusted (issue 47: the key travelled with the folder)."""
    import shutil

    a = DiskStore(tmp_path / "cache", 1 << 20)
    for i in range(3):
        a.put(key_of(i), [i], tensors(i), fingerprint=FP)
    a.close()
    shutil.copytree(tmp_path / "cache", tmp_path / "copy")
    with caplog.at_level(logging.WARNING, logger="engine.kv.cold.disk_store"):
        b = DiskStore(tmp_path / "copy", 1 << 20)
    s = b.stats()
    assert s["new_secret"] and s["dropped_invalid"] == 3 and s["entries"] == 0
    assert "no key for this folder" in caplog.text and "dropped its 3 entries" in caplog.text
    assert b.get(key_of(1), tokens=[1], fingerprint=FP) is None
    # the original keeps its entries
    assert DiskStore(tmp_path / "cache", 1 << 20).get(key_of(1), tokens=[1], fingerprint=FP) is not None


def test_an_old_key_inside_the_folder_no_longer_counts(tmp_path, caplog):
    """A folder from a longdoc that kept `.secret` inside it: the in-folder key is deleted and the
    entries it signed are dropped, with the reason."""
    root = tmp_path / "cache"
    a = DiskStore(root, 1 << 20)
    a.put(key_of(1), [1], tensors(1), fingerprint=FP)
    a.close()
    key_path(root).unlink()
    (root / SECRET_NAME).write_bytes(os.urandom(32))
    with caplog.at_level(logging.WARNING, logger="engine.kv.cold.disk_store"):
        b = DiskStore(root, 1 << 20)
    assert not (root / SECRET_NAME).exists() and len(b) == 0 and "an older longdoc" in caplog.text


def test_key_readable_by_others_is_replaced(tmp_path, caplog):
    a = DiskStore(tmp_path, 1 << 20)
    a.put(key_of(1), [1], tensors(1), fingerprint=FP)
    a.close()
    os.chmod(key_path(tmp_path), 0o644)
    with caplog.at_level(logging.WARNING, logger="engine.kv.cold.disk_store"):
        b = DiskStore(tmp_path, 1 << 20)
    assert "not trusted" in caplog.text and b.stats()["new_secret"] and len(b) == 0
    assert stat.S_IMODE(key_path(tmp_path).stat().st_mode) == 0o600


def _sparse(path: Path, size: int, preamble: bytes = b"") -> None:
    path.parent.mkdir(exist_ok=True)
    with open(path, "wb") as f:
        f.write(preamble)
        f.truncate(size)


@pytest.mark.parametrize("forged_preamble", [False, True])
def test_100gb_sparse_file_evicts_nothing_and_is_not_hashed(tmp_path, caplog, forged_preamble):
    """Was: every valid entry evicted on open (the sparse file counted against the cap) and the file
    hashed end to end through mmap."""
    cap = 1 << 20
    a = DiskStore(tmp_path, cap)
    for i in range(3):
        a.put(key_of(i), [i], tensors(i), fingerprint=FP)
    used = a.bytes_used
    a.close()
    size = 100 * 2**30
    big = key_of(0xEE)
    pre = b""
    if forged_preamble:  # magic, version, header length and a payload length that matches the size
        pre = struct.pack("<8sIIQQ", b"LDKVBLK\x00", 2, 0, 64, size - 128)
    _sparse(tmp_path / big[:2] / big, size, pre)
    t0 = time.perf_counter()
    with caplog.at_level(logging.WARNING, logger="engine.kv.cold.disk_store"):
        b = DiskStore(tmp_path, cap)
    took = time.perf_counter() - t0
    assert took < 2.0, took  # hashing 100 GB takes minutes
    assert sorted(b.keys()) == [key_of(i) for i in range(3)] and b.bytes_used == used
    assert b.stats()["evictions"] == 0 and b.stats()["dropped_invalid"] == 1
    assert any(big in name for name, _ in b.stats()["dropped"]) and big in caplog.text
    for i in range(3):
        assert b.get(key_of(i), tokens=[i], fingerprint=FP) is not None


def test_sparse_file_that_fits_the_capacity_is_refused_before_hashing(tmp_path):
    """A huge cap (1 TB): the sparse file is no larger than it, so its size alone cannot tell; its
    header's tensor table (here none) does not describe the payload, so it is refused before the
    payload is read."""
    a = DiskStore(tmp_path, 2**40)
    size = 100 * 2**30
    big = key_of(0xEE)
    header = json.dumps({"key": big, "fingerprint": FP, "tokens": [1], "byteorder": "little",
                         "tensors": [], "meta": {}}).encode()
    hl = len(header)
    payload_at = (64 + hl + 63) // 64 * 64
    _sparse(tmp_path / big[:2] / big, size,
            struct.pack("<8sIIQQ", b"LDKVBLK\x00", 2, 0, hl, size - payload_at) + b"\0" * 32 + header)
    b = DiskStore(tmp_path, 2**40)
    t0 = time.perf_counter()
    assert b.get(big, tokens=[1], fingerprint=FP) is None
    assert time.perf_counter() - t0 < 2.0
    assert not (tmp_path / big[:2] / big).exists() and b.stats()["rejected_corrupt"] == 1
    del a


def test_over_capacity_folder_verifies_before_evicting_valid_entries(tmp_path):
    """Valid-looking but forged files that push the folder over its cap are verified and dropped;
    the valid entries stay (nothing evicted for them)."""
    a = DiskStore(tmp_path, 1 << 20)
    for i in range(3):
        a.put(key_of(i), [i], tensors(i), fingerprint=FP)
    size = a.bytes_used // 3
    a.close()
    src = tmp_path / key_of(0)[:2] / key_of(0)
    for j in range(10, 20):  # copies of a sound file, newest of all, under other keys: unsigned
        k = key_of(j)
        (tmp_path / k[:2]).mkdir(exist_ok=True)
        _resign = bytearray(src.read_bytes())
        _resign[-1] ^= 1
        (tmp_path / k[:2] / k).write_bytes(bytes(_resign))
    b = DiskStore(tmp_path, 3 * size + size // 2)
    assert sorted(b.keys()) == [key_of(i) for i in range(3)]
    assert b.stats()["evictions"] == 0 and b.stats()["dropped_invalid"] == 10


# ----------------------------------------------------------------------------- the engine over the store
@pytest.fixture(scope="module")
def llama_folder(tmp_path_factory):
    from tests.engine.tiny_models import tiny_hf_model

    folder = tmp_path_factory.mktemp("hostile-llama")
    tiny_hf_model("llama", seed=3).save_pretrained(folder)
    return folder


def _make(folder, disk):
    import dataclasses

    from engine import LLM, CacheConfig, SchedulerConfig

    sched = dataclasses.replace(SchedulerConfig(), max_model_len=512, max_prefill_chunk=16, max_num_seqs=4)
    return LLM(model=folder, device="cpu", dtype="float32",
               cache=CacheConfig(block_size=4, memory_budget=2**24, disk_cache_dir=disk), scheduler=sched)


def _toks(n, seed):
    return torch.randint(0, 128, (n,), generator=torch.Generator().manual_seed(seed)).tolist()


def test_engine_repairs_every_bad_entry_in_one_run_and_keeps_the_valid_shorter_prefix(llama_folder, tmp_path):
    """Chunk entries at 16, 32, 48, 64: the ones at 32 and 48 corrupted. Was: the whole cold hit
    discarded (the valid entry at 16 too) and one bad entry repaired per run."""
    from engine import SamplingParams

    params = SamplingParams(max_tokens=8, ignore_eos=True)
    doc = _toks(70, 40)
    disk = tmp_path / "kv"
    a = _make(llama_folder, str(disk))
    ref = a.generate([doc + [1]], params)[0].token_ids
    store = a.prefix.cold.disk
    seq = _seq(a, doc)
    a.prefix.update_hashes(seq)
    keys = {p: a.prefix._chunk_key(seq, p) for p in (16, 32, 48, 64)}
    assert all(store.contains(k) for k in keys.values())
    for p in (32, 48):
        f = store.path_for(keys[p])
        raw = bytearray(f.read_bytes())
        raw[-5] ^= 0xFF
        f.write_bytes(bytes(raw))
    b = _make(llama_folder, str(disk))
    out = b.generate([doc + [1]], params)[0]
    assert out.token_ids == ref
    assert out.cached_tokens == 16 and b.prefix.stats.cold_hit_tokens == 16  # the valid shorter prefix
    st = b.prefix.cold.disk.stats()
    assert st["rejected_corrupt"] == 2
    # both bad entries were rewritten in that same run: a third engine resumes at 64
    c = _make(llama_folder, str(disk))
    assert c.generate([doc + [1]], params)[0].cached_tokens == 64
    assert c.prefix.cold.disk.stats()["rejected_corrupt"] == 0


def _seq(llm, ids):
    from engine import SamplingParams
    from engine.core.sequence import Sequence

    return Sequence(0, list(ids), SamplingParams(max_tokens=1), None)


def test_engine_refuses_a_forged_entry_and_answers_as_uncached(llama_folder, tmp_path):
    """An entry whose tensors were replaced and whose plain SHA-256 was recomputed: the answer is the
    uncached one (was: the forged KV used, a garbage answer, exit 0)."""
    from engine import SamplingParams

    params = SamplingParams(max_tokens=8, ignore_eos=True)
    doc = _toks(70, 41)
    disk = tmp_path / "kv"
    ref = _make(llama_folder, str(disk)).generate([doc + [2]], params)[0].token_ids
    files = [f for f in disk.rglob("*") if f.is_file() and len(f.name) == 64]
    assert files
    for f in files:
        _resign_sha256(f, lambda raw: raw.__setitem__(slice(-512, None), b"\x7f" * 512))
    b = _make(llama_folder, str(disk))
    out = b.generate([doc + [2]], params)[0]
    assert out.cached_tokens == 0 and out.token_ids == ref
    assert b.prefix.cold.disk.stats()["rejected_corrupt"] >= 1


def test_cache_dir_that_is_a_file_is_one_engine_error_line(llama_folder, tmp_path):
    f = tmp_path / "cachefile"
    f.write_text("not a folder")
    for path in (f, f / "sub"):
        with pytest.raises(CacheDirError) as e:
            _make(llama_folder, str(path))
        assert isinstance(e.value, EngineError) and "\n" not in str(e.value) and "is a file" in str(e.value).replace(
            "which is a file", "is a file")
    with pytest.raises(CacheDirError):
        DiskStore(f, 1 << 20)


_READ_ONLY_CHILD = """
import json, logging, sys
from tests.engine.kv.test_disk_hostile import _make, _toks
from engine import SamplingParams
llm = _make(sys.argv[1], sys.argv[2])
out = llm.generate([_toks(70, 42) + [3]], SamplingParams(max_tokens=8, ignore_eos=True))[0]
print(json.dumps(out.token_ids))
"""


def _drop_dac_override():  # runs in the child before exec: root loses its bypass of file modes
    libc = ctypes.CDLL(None, use_errno=True)
    for cap in (1, 2, 3):  # CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, CAP_FOWNER
        libc.prctl(24, cap, 0, 0, 0)  # PR_CAPBSET_DROP


def test_read_only_cache_folder_answers_uncached_with_one_warning(llama_folder, tmp_path):
    from engine import SamplingParams

    ro = tmp_path / "ro"
    ro.mkdir()
    ref = _make(llama_folder, None).generate([_toks(70, 42) + [3]], SamplingParams(max_tokens=8, ignore_eos=True))[0]
    for variant in ("empty", "filled"):
        if variant == "filled":  # a cache written earlier, then made read-only (files and folders)
            os.chmod(ro, 0o755)
            _make(llama_folder, str(ro)).generate([_toks(70, 42) + [3]], SamplingParams(max_tokens=8, ignore_eos=True))
            for p in ro.rglob("*"):
                os.chmod(p, 0o555 if p.is_dir() else 0o444)
        os.chmod(ro, 0o555)
        try:
            r = subprocess.run([sys.executable, "-c", _READ_ONLY_CHILD, str(llama_folder), str(ro)],
                               capture_output=True, text=True, cwd=ROOT, timeout=300,
                               preexec_fn=_drop_dac_override if os.geteuid() == 0 else None)
        finally:
            for p in [ro, *ro.rglob("*")]:
                os.chmod(p, 0o755 if p.is_dir() else 0o644)
        assert r.returncode == 0, r.stderr[-2000:]
        assert json.loads(r.stdout.strip().splitlines()[-1]) == ref.token_ids
        lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
        assert "Traceback" not in r.stderr
        cache_lines = [ln for ln in lines if str(ro) in ln or "disk KV" in ln]
        assert len(cache_lines) == 1 and "running without it" in cache_lines[0], r.stderr


def test_a_fake_entry_dated_in_the_future_never_displaces_valid_ones(tmp_path):
    """A file with a sound preamble and header but no valid key-checksum, sized to fit the cap and
    dated a year ahead (issue 47: it silently evicted every valid entry): when a put needs room,
    the unchecked file is verified first and dropped; the valid entries stay."""
    cap = 1 << 20
    a = DiskStore(tmp_path, cap)
    for i in range(3):
        a.put(key_of(i), [i], tensors(i), fingerprint=FP)
    entry = a.bytes_used // 3
    a.close()
    src = (tmp_path / key_of(0)[:2] / key_of(0)).read_bytes()
    fake = bytearray(src)
    fake[-1] ^= 1  # the checksum no longer holds
    k = key_of(99)
    (tmp_path / k[:2]).mkdir(exist_ok=True)
    (tmp_path / k[:2] / k).write_bytes(bytes(fake))
    future = time.time() + 365 * 86400
    os.utime(tmp_path / k[:2] / k, (future, future))
    b = DiskStore(tmp_path, 4 * entry + entry // 2)  # room for the three, the fake and half of one more
    assert len(b) == 4  # the fake looks like an entry until it is read or room is needed
    assert b.put(key_of(5), [5], tensors(5), fingerprint=FP)  # needs room: the fake goes, not a valid entry
    assert b.stats()["evictions"] == 0 and b.stats()["dropped_invalid"] == 1
    assert not (tmp_path / k[:2] / k).exists()
    for i in (0, 1, 2, 5):
        assert b.get(key_of(i), tokens=[i], fingerprint=FP) is not None
