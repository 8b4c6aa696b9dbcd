"""Forged model files: GGUF headers built byte by byte (alignment 0, arrays nested 50,000 deep,
dims whose 64-bit product wraps to 0, counts larger than the file) and HF folders whose config.json
asks for a model far larger than its weights. Each gives one ModelLoadError line naming the file
and the reason, quickly, before any module is built."""

from __future__ import annotations

import json
import shutil
import struct
import time

import pytest

from engine import LLM, CacheConfig, ModelLoadError
from engine.model.loader.gguf_file import read_gguf


def _s(text: str) -> bytes:
    b = text.encode()
    return struct.pack("<Q", len(b)) + b


def _kv_u32(key: str, v: int) -> bytes:
    return _s(key) + struct.pack("<II", 4, v)


def _kv_str(key: str, v: str) -> bytes:
    return _s(key) + struct.pack("<I", 8) + _s(v)


def gguf_bytes(kvs: list[bytes], tensors: list[tuple[str, tuple[int, ...], int, int]], n_tensors=None,
               n_kv=None, data: bytes = b"\0" * 64, align: int = 32) -> bytes:
    """A GGUF v3 file: header, the given KV records, tensor infos (name, ggml dims, type, offset),
    padding to `align`, then `data`."""
    head = b"GGUF" + struct.pack("<IQQ", 3, len(tensors) if n_tensors is None else n_tensors,
                                 len(kvs) if n_kv is None else n_kv)
    body = b"".join(kvs)
    for name, dims, gtype, offset in tensors:
        body += _s(name) + struct.pack("<I", len(dims)) + b"".join(struct.pack("<Q", d) for d in dims)
        body += struct.pack("<IQ", gtype, offset)
    out = head + body
    out += b"\0" * (-len(out) % align)
    return out + data


def _load_error(path) -> str:
    t0 = time.perf_counter()
    with pytest.raises(ModelLoadError) as e:
        LLM(model=path, device="cpu", cache=CacheConfig(block_size=4, memory_budget=2**20), max_model_len=64)
    assert time.perf_counter() - t0 < 10, "a forged header must be refused at once"
    msg = str(e.value)
    assert msg and "\n" not in msg and path.name in msg, msg
    return msg


ARCH = [_kv_str("general.architecture", "llama")]


def test_control_a_well_formed_forged_header_parses(tmp_path):
    """The hand-written format the other tests corrupt is itself valid (so they test one fault each)."""
    p = tmp_path / "ok.gguf"
    p.write_bytes(gguf_bytes(ARCH + [_kv_u32("general.alignment", 32)], [("t", (4, 2), 0, 0)]))
    f = read_gguf(p)
    assert f.tensors["t"].shape == (2, 4) and f.tensors["t"].nbytes == 32
    assert f.tensor("t").shape == (2, 4)


def test_alignment_zero(tmp_path):
    p = tmp_path / "align0.gguf"
    p.write_bytes(gguf_bytes(ARCH + [_kv_u32("general.alignment", 0)], [("t", (4,), 0, 0)]))
    assert "alignment" in _load_error(p)
    p.write_bytes(gguf_bytes(ARCH + [_kv_u32("general.alignment", 24)], [("t", (4,), 0, 0)]))
    assert "alignment" in _load_error(p)


def test_arrays_nested_50000_deep(tmp_path):
    p = tmp_path / "nested.gguf"
    depth = 50_000
    value = struct.pack("<I", 9) + struct.pack("<IQ", 9, 1) * (depth - 1) + struct.pack("<IQ", 4, 1) + b"\0" * 4
    p.write_bytes(gguf_bytes(ARCH + [_s("x.nested") + value], []))
    assert "nested" in _load_error(p)


def test_dims_whose_product_wraps_to_zero(tmp_path):
    """2^32 x 2^32 F32 elements: numpy's int64 product is 0 and the tensor 'fit' in 64 bytes."""
    p = tmp_path / "wrap.gguf"
    p.write_bytes(gguf_bytes(ARCH, [("token_embd.weight", (2**32, 2**32), 0, 0)]))
    msg = _load_error(p)
    assert "token_embd.weight" in msg and ("ends at byte" in msg or "dims" in msg)
    p.write_bytes(gguf_bytes(ARCH, [("t", (2**63, 2), 0, 0)]))  # 2^64 elements, wraps too
    assert "'t'" in _load_error(p)
    p.write_bytes(gguf_bytes(ARCH, [("t", (4, 0), 0, 0)]))
    assert "dims" in _load_error(p)


@pytest.mark.parametrize("field", ["tensors", "kv"])
def test_counts_larger_than_the_file(tmp_path, field):
    p = tmp_path / f"count-{field}.gguf"
    kw = {"n_tensors": 900_000} if field == "tensors" else {"n_kv": 900_000}
    p.write_bytes(gguf_bytes(ARCH, [], **kw))
    assert "corrupt GGUF header" in _load_error(p)


def test_string_and_array_lengths_larger_than_the_file(tmp_path):
    p = tmp_path / "longstr.gguf"
    p.write_bytes(gguf_bytes([_s("general.architecture") + struct.pack("<IQ", 8, 2**40)], []))
    assert "string of" in _load_error(p)
    p.write_bytes(gguf_bytes(ARCH + [_s("x.arr") + struct.pack("<IIQ", 9, 8, 2**60)], []))
    assert "array of" in _load_error(p)
    p.write_bytes(gguf_bytes(ARCH + [_s("x.arr") + struct.pack("<IIQ", 9, 0, 2**62)], []))
    assert "array of" in _load_error(p)


def test_misaligned_and_duplicate_tensors(tmp_path):
    p = tmp_path / "misaligned.gguf"
    p.write_bytes(gguf_bytes(ARCH, [("t", (4,), 0, 4)]))
    assert "aligned" in _load_error(p)
    p.write_bytes(gguf_bytes(ARCH, [("t", (4,), 0, 0), ("t", (4,), 0, 32)]))
    assert "twice" in _load_error(p)


# ----------------------------------------------------------------------------- HF config.json
def _folder(tmp_path, tiny_folders, **patch):
    src, _ = tiny_folders["llama"]
    folder = tmp_path / "m"
    shutil.copytree(src, folder)
    cfg = json.loads((folder / "config.json").read_text())
    cfg.update(patch)
    (folder / "config.json").write_text(json.dumps(cfg))
    return folder


def test_config_with_a_million_layers_is_refused_before_building(tmp_path, tiny_folders):
    """Was: 150 s and 2.6 GB building a million layers on the meta device before any check."""
    import tracemalloc

    folder = _folder(tmp_path, tiny_folders, num_hidden_layers=1_000_000)
    tracemalloc.start()
    t0 = time.perf_counter()
    with pytest.raises(ModelLoadError) as e:
        LLM(model=folder, device="cpu", cache=CacheConfig(block_size=4, memory_budget=2**20), max_model_len=64)
    took = time.perf_counter() - t0
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    msg = str(e.value)
    assert "\n" not in msg and "config.json" in msg and "1000000" in msg.replace(",", ""), msg
    assert took < 5 and peak < 200 * 2**20, (took, peak)


@pytest.mark.parametrize("patch, word", [
    ({"num_hidden_layers": 40}, "parameters"),  # plausible alone, but the weights hold 4 layers
    ({"hidden_size": 64 * 1024 * 1024}, "hidden_size"),
    ({"vocab_size": 0}, "vocab_size"),
    ({"num_attention_heads": 3}, "heads"),  # 64 is not a multiple of 3 heads, 2 kv heads
    ({"intermediate_size": 10**9}, "intermediate_size"),
    ({"vocab_size": 50_000}, "parameters"),  # the embedding would need 3.2M weights, the file has 8K
])
def test_config_inconsistent_with_its_weights(tmp_path, tiny_folders, patch, word):
    folder = _folder(tmp_path, tiny_folders, **patch)
    with pytest.raises(ModelLoadError) as e:
        LLM(model=folder, device="cpu", cache=CacheConfig(block_size=4, memory_budget=2**20), max_model_len=64)
    msg = str(e.value)
    assert "\n" not in msg and "config.json" in msg and word in msg, msg


def test_gguf_metadata_asking_for_more_layers_than_its_tensors(tmp_path):
    from tests.engine.tiny_models import tiny_hf_model, write_gguf

    hf = tiny_hf_model("qwen2", seed=4)
    hf.config.num_hidden_layers = 1_000_000  # only the metadata says so; 4 layers of tensors are written
    p = tmp_path / "layers.gguf"
    write_gguf(hf, "qwen2", p, "F32")
    t0 = time.perf_counter()
    msg = _load_error(p)
    assert "parameters" in msg or "num_layers" in msg
    assert time.perf_counter() - t0 < 10


@pytest.mark.parametrize("kv, word", [
    ({"llama.rope.freq_base": 0.0}, "rope.freq_base"),  # issue 47: NaN logits, an empty answer, exit 0
    ({"tokenizer.ggml.bos_token_id": 4_000_000}, "bos_token_id"),  # issue 47: an IndexError traceback
    ({"tokenizer.ggml.eos_token_id": 4_000_000}, "eos_token_id"),
    ({"llama.attention.layer_norm_rms_epsilon": -1.0}, "rms_norm_eps"),
])
def test_gguf_metadata_values_out_of_range_are_one_line(tmp_path, kv, word):
    from tests.engine.tiny_models import tiny_hf_model, write_gguf

    hf = tiny_hf_model("llama", seed=5)
    if "rope.freq_base" in next(iter(kv)):
        hf.config.rope_parameters["rope_theta"] = 0.0
    if "epsilon" in next(iter(kv)):
        hf.config.rms_norm_eps = -1.0
    p = tmp_path / "forged.gguf"
    write_gguf(hf, "llama", p, "F32", extra_kv={k: v for k, v in kv.items() if "token" in k})
    msg = _load_error(p)
    assert word in msg, msg


def test_gguf_tensor_larger_than_any_weight_of_the_model_is_refused_before_allocating(tmp_path):
    """A tensor with more elements than the model's largest weight (issue 47: a sparse file declaring
    a 25 GB tensor made a 25 GiB allocation): refused from the header, naming it."""
    import numpy as np

    from tests.engine.tiny_models import tiny_hf_model, write_gguf

    hf = tiny_hf_model("llama", seed=5)
    c = hf.config
    big = np.zeros(c.vocab_size * c.hidden_size + 8, dtype=np.float32)
    p = tmp_path / "big.gguf"
    write_gguf(hf, "llama", p, "F32", extra_tensors={"blk.0.extra.weight": big})
    msg = _load_error(p)
    assert "blk.0.extra.weight" in msg and "more than any weight" in msg, msg
