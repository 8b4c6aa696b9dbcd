"""Loading: GGUF files (every family, several ggml types, llama.cpp conventions), HF folders, and the
one-line errors for corrupt, truncated, unknown or incomplete models."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
import torch

from engine import LLM, CacheConfig, ModelLoadError, UnsupportedModelError
from engine.model.loader.gguf_file import read_gguf
from tests.engine.tiny_models import FAMILIES, VOCAB, tiny_hf_model, write_gguf


def cache() -> CacheConfig:
    # float32 pages: the loaded models' logits are held to transformers' float32 ones
    return CacheConfig(block_size=4, memory_budget=16 * 2**20, kv_dtype="float32")


IDS = list(range(3, 40, 2))


@pytest.mark.parametrize("family", FAMILIES)
def test_gguf_f32_matches_transformers(tmp_path, family):
    """A GGUF written llama.cpp-style (renamed, Gemma norms stored as 1 + w, Llama q/k permuted)
    loads back into logits equal to transformers' (float32 bound 2e-4)."""
    # GGUF does not store Gemma's query scalar: the engine uses head_dim, as Gemma 3 does
    hf = tiny_hf_model(family, seed=2, **({"query_pre_attn_scalar": 16} if family == "gemma3" else {}))
    path = tmp_path / "m.gguf"
    write_gguf(hf, family, path, "F32")
    llm = LLM(model=path, device="cpu", dtype="float32", cache=cache(), max_model_len=256)
    assert llm.tokenizer is None
    with torch.no_grad():
        ref = hf(torch.tensor([IDS])).logits[0]
    assert (llm.prompt_logits(IDS) - ref).abs().max().item() < 2e-4


@pytest.mark.parametrize("qtype", ["F16", "BF16", "Q8_0"])
def test_gguf_quantized_weights_are_the_dequantized_ones(tmp_path, qtype):
    import gguf

    hf = tiny_hf_model("llama", seed=3)
    path = tmp_path / f"m-{qtype}.gguf"
    write_gguf(hf, "llama", path, qtype)
    llm = LLM(model=path, device="cpu", dtype="float32", cache=cache(), max_model_len=256)
    q = gguf.GGMLQuantizationType[qtype]
    for name in ("model.layers.1.mlp.down_proj.weight", "model.layers.0.self_attn.v_proj.weight"):
        w = hf.state_dict()[name].float().numpy()
        expect = gguf.quants.dequantize(gguf.quants.quantize(w, q), q)
        got = dict(llm.model.named_parameters())[name].numpy()
        np.testing.assert_array_equal(got, expect)
    with torch.no_grad():
        ref = hf(torch.tensor([IDS])).logits[0]
    assert (llm.prompt_logits(IDS) - ref).abs().max().item() < 0.5  # quantisation noise only


def _random_kquant_bytes(qtype: str, rows: int, blocks: int, seed: int) -> np.ndarray:
    """Random K-quant blocks with finite, small fp16 scales."""
    sizes = {"Q4_K": 144, "Q5_K": 176, "Q6_K": 210}
    rng = np.random.default_rng(seed)
    raw = rng.integers(0, 256, size=(rows, blocks, sizes[qtype]), dtype=np.uint8)
    scales = rng.uniform(0.001, 0.05, size=(rows, blocks, 2)).astype(np.float16).view(np.uint8)
    if qtype == "Q6_K":
        raw[..., 208:210] = scales[..., :2]
    else:
        raw[..., 0:4] = scales.reshape(rows, blocks, 4)
    return raw.reshape(rows, blocks * sizes[qtype])


@pytest.mark.parametrize("qtype", ["Q4_K", "Q5_K", "Q6_K"])
def test_k_quants_read_through_the_gguf_reader(tmp_path, qtype):
    """K-quant tensors written to a file come back dequantised like transformers' independent torch
    dequantiser (transformers >= 5.24) or, without it, like gguf.quants on the raw bytes."""
    import gguf

    q = gguf.GGMLQuantizationType[qtype]
    raw = _random_kquant_bytes(qtype, rows=3, blocks=2, seed=7)
    path = tmp_path / "k.gguf"
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_tensor("t", raw, raw_dtype=q)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    got = read_gguf(path).tensor("t")
    assert got.shape == (3, 512)
    try:
        from transformers.integrations.gguf.dequant import dequantize as hf_dequantize
    except ImportError:
        expect = gguf.quants.dequantize(raw, q)
    else:
        expect = hf_dequantize(torch.from_numpy(raw.reshape(-1)), int(q)).reshape(3, 512).numpy()
    np.testing.assert_allclose(got, expect, rtol=1e-5, atol=1e-6)
    assert np.isfinite(got).all() and np.abs(got).max() > 0


def test_hf_folder_roundtrip_and_tokenizerless_text_error(tiny_folders):
    folder, _ = tiny_folders["qwen3"]
    llm = LLM(model=folder, device="cpu", dtype="float32", cache=cache(), max_model_len=256)
    assert llm.config.architecture == "qwen3" and llm.config.qk_norm
    with pytest.raises(Exception, match="no tokenizer"):
        llm.generate("text needs a tokenizer")


# ----------------------------------------------------------------------------- errors
def _one_line(exc: BaseException) -> str:
    msg = str(exc)
    assert "\n" not in msg and msg
    return msg


@pytest.fixture(scope="module")
def tiny_gguf(tmp_path_factory):
    path = tmp_path_factory.mktemp("g") / "tiny.gguf"
    write_gguf(tiny_hf_model("qwen2", seed=4), "qwen2", path, "F32")
    return path


def test_truncated_gguf(tmp_path, tiny_gguf):
    data = tiny_gguf.read_bytes()
    for cut in (10, 200, len(data) // 2, len(data) - 7):
        bad = tmp_path / f"cut{cut}.gguf"
        bad.write_bytes(data[:cut])
        with pytest.raises(ModelLoadError) as e:
            LLM(model=bad, device="cpu", cache=cache(), max_model_len=256)
        msg = _one_line(e.value)
        assert bad.name in msg and ("truncated" in msg or "not a GGUF" in msg)


def test_corrupt_gguf_magic(tmp_path, tiny_gguf):
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"XXXX" + tiny_gguf.read_bytes()[4:])
    with pytest.raises(ModelLoadError, match="not a GGUF file") as e:
        LLM(model=bad, device="cpu", cache=cache(), max_model_len=256)
    _one_line(e.value)


def test_unknown_gguf_architecture(tmp_path):
    path = tmp_path / "mamba.gguf"
    write_gguf(tiny_hf_model("llama", seed=5), "llama", path, "F32", arch="mamba")
    with pytest.raises(UnsupportedModelError, match="'mamba'") as e:
        LLM(model=path, device="cpu", cache=cache(), max_model_len=256)
    _one_line(e.value)


def test_missing_tensor_is_named(tmp_path):
    path = tmp_path / "holey.gguf"
    write_gguf(tiny_hf_model("llama", seed=5), "llama", path, "F32", drop={"blk.2.ffn_up.weight"})
    with pytest.raises(ModelLoadError, match=r"model\.layers\.2\.mlp\.up_proj\.weight") as e:
        LLM(model=path, device="cpu", cache=cache(), max_model_len=256)
    _one_line(e.value)


def test_hf_folder_errors(tmp_path, tiny_folders):
    src, _ = tiny_folders["llama"]
    folder = tmp_path / "m"
    shutil.copytree(src, folder)
    cfg = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**cfg, "model_type": "bert"}))
    with pytest.raises(UnsupportedModelError, match="'bert'"):
        LLM(model=folder, device="cpu", cache=cache(), max_model_len=256)
    (folder / "config.json").write_text(json.dumps(cfg))
    st = next(folder.glob("*.safetensors"))
    st.write_bytes(st.read_bytes()[: st.stat().st_size // 2])
    with pytest.raises(ModelLoadError, match=st.name) as e:
        LLM(model=folder, device="cpu", cache=cache(), max_model_len=256)
    _one_line(e.value)
    with pytest.raises(ModelLoadError, match="not found"):
        LLM(model=tmp_path / "nowhere", device="cpu", cache=cache(), max_model_len=256)


def test_vocab_is_from_the_file(tiny_gguf):
    f = read_gguf(tiny_gguf)
    assert f.architecture == "qwen2" and f.get("qwen2.vocab_size") == VOCAB


def test_an_in_memory_models_marker_file_goes_with_its_llm():
    """`llm_from_model` gives the LLM a small stand-in file as its model path; it is removed when
    the LLM is (it once stayed in the temp folder, one file per call, hundreds a test run)."""
    import gc

    from engine.model.loader.random_weights import hf_to_engine_config, llm_from_model, random_model
    from tests.engine.tiny_models import tiny_hf_config

    cfg = hf_to_engine_config(tiny_hf_config("llama"))
    llm = llm_from_model(random_model(cfg, torch.device("cpu"), torch.float32, seed=1), cfg, device="cpu",
                         dtype=torch.float32)
    marker = llm.model_path
    assert marker.is_file() and marker.name.startswith("longdoc-in-memory-")
    del llm
    gc.collect()
    assert not marker.exists()
