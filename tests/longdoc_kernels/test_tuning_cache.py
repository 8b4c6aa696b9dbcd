"""longdoc_kernels/tuning_cache.py: the decode tuner's choices on disk. Runs on the CPU (the tuner itself
needs CUDA; tests/longdoc_kernels/test_kernels_gpu.py covers it)."""

from __future__ import annotations

import json

import torch

from longdoc_kernels import tuning_cache as tc

KEY = tc.key_str((1, 32, 8, 128, torch.bfloat16, True, False, 2048))


def test_key_text_names_dtypes():
    assert KEY == "(1, 32, 8, 128, 'torch.bfloat16', True, False, 2048)"


def test_store_then_load_under_the_same_fingerprint_only(tmp_path):
    path = tmp_path / "sub" / "tuning.json"
    fp = tc.fingerprint("NVIDIA H200", (9, 0), "2.11.0", "3.6.0")
    assert tc.load(fp, path) == {}  # no file yet
    assert tc.store(fp, KEY, (64, 64, 4, 128, 4, 3), path)
    assert tc.store(fp, "other", (8, 32, 4, 32, 4, 3), path)  # merged, not replaced
    assert tc.load(fp, path) == {KEY: (64, 64, 4, 128, 4, 3), "other": (8, 32, 4, 32, 4, 3)}
    other_gpu = tc.fingerprint("NVIDIA H100", (9, 0), "2.11.0", "3.6.0")
    assert tc.load(other_gpu, path) == {}
    assert tc.load(tc.fingerprint("NVIDIA H200", (9, 0), "2.11.0", "3.7.0"), path) == {}
    assert [p.name for p in path.parent.iterdir()] == ["tuning.json"]  # no temporary file left


def test_fingerprint_changes_with_the_kernel_source(monkeypatch, tmp_path):
    fp = tc.fingerprint("G", (9, 0), "t", "tr")
    fake = tmp_path / "tuning_cache.py"
    (tmp_path / "paged_attention.py").write_text("# another kernel\n")
    monkeypatch.setattr(tc, "__file__", str(fake))
    assert tc.fingerprint("G", (9, 0), "t", "tr") != fp


def test_corrupt_foreign_or_malformed_files_are_ignored(tmp_path, caplog):
    path = tmp_path / "tuning.json"
    fp = "fp"
    path.write_text("{not json")
    assert tc.load(fp, path) == {}
    assert "unreadable" in caplog.text
    path.write_text(json.dumps({"version": 99, "sets": {fp: {KEY: [1, 2, 3, 4, 4, 3]}}}))
    assert tc.load(fp, path) == {}
    path.write_text(json.dumps({"version": 1, "sets": {fp: {KEY: [1, 2, 3], "b": [0, 64, 4, 64, 4, 3], "c": [8, 64, 4, 64, 4, 3], "d": [8, 64, 4, 64]}}}))
    assert tc.load(fp, path) == {"c": (8, 64, 4, 64, 4, 3)}  # only well-formed entries
    assert tc.store(fp, KEY, (2, 64, 4, 64, 4, 3), path)  # a corrupt file is replaced, never trusted in part
    path.write_text("{not json")
    assert tc.store(fp, KEY, (2, 64, 4, 64, 4, 3), path)
    assert tc.load(fp, path) == {KEY: (2, 64, 4, 64, 4, 3)}


def test_location_from_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("LONGDOC_TUNING_CACHE", str(tmp_path / "x.json"))
    assert tc.cache_path() == tmp_path / "x.json"
    monkeypatch.setenv("LONGDOC_TUNING_CACHE", "0")
    assert tc.cache_path() is None
    assert tc.load("fp") == {} and tc.store("fp", KEY, (1, 64, 4, 64, 4, 3)) is False
    monkeypatch.delenv("LONGDOC_TUNING_CACHE")
    monkeypatch.setenv("LONGDOC_CACHE", str(tmp_path))  # the engine's cache folder (engine/paths.py)
    assert tc.cache_path() == tmp_path / "decode_tuning.json"


def test_paged_attention_reads_the_cache_once_per_device(monkeypatch, tmp_path):
    """The CUDA-only lookup helper, with the device queries stubbed (no GPU here)."""
    from longdoc_kernels import paged_attention as pa

    path = tmp_path / "t.json"
    monkeypatch.setenv("LONGDOC_TUNING_CACHE", str(path))
    monkeypatch.setattr(pa, "_DISK_TUNED", {})
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda i: "Fake GPU")
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda i: (9, 0))
    import triton

    fp = tc.fingerprint("Fake GPU", (9, 0), torch.__version__, triton.__version__)
    tc.store(fp, KEY, (16, 64, 4, 128, 4, 3))
    got_fp, entries = pa._disk_tuned(torch.device("cuda", 0))
    assert got_fp == fp and entries == {KEY: (16, 64, 4, 128, 4, 3)}
    path.unlink()
    assert pa._disk_tuned(torch.device("cuda", 0))[1] == entries  # read once, then kept

    def broken(i):
        raise RuntimeError("no driver")

    monkeypatch.setattr(torch.cuda, "get_device_name", broken)
    assert pa._disk_tuned(torch.device("cuda", 1)) == ("", {})  # a failure never stops a decode
