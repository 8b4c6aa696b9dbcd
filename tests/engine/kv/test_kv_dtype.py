"""CacheConfig.kv_dtype: 16-bit K/V pages under a float32 model on the CPU (engine/kv/paged_cache.py
resolve_kv_dtype, the rounding of fresh keys in engine/runner/forward_context.py, the C kernels'
half pools in longdoc_kernels/cpu)."""

from __future__ import annotations

import pytest
import torch

from engine import LLM, CacheConfig, SamplingParams, SchedulerConfig
from engine.kv.paged_cache import resolve_kv_dtype
from longdoc_kernels import cpu
from tests.engine.tiny_models import VOCAB


def make_llm(folder, kv_dtype="float32", chunk=1024) -> LLM:
    return LLM(model=folder, device="cpu", dtype="float32",
               cache=CacheConfig(block_size=4, memory_budget=64 * 2**20, kv_dtype=kv_dtype),
               scheduler=SchedulerConfig(max_model_len=512, max_prefill_chunk=chunk))


def prompt(n: int, seed: int = 1) -> list[int]:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, VOCAB, (n,), generator=g).tolist()


def test_resolution():
    cpu_dev = torch.device("cpu")
    # by default: half where the C kernels read it and the model is float32, else the model's
    assert resolve_kv_dtype(None, cpu_dev, torch.float32) == (torch.float16 if cpu.kv_f16() else torch.float32)
    assert resolve_kv_dtype(None, cpu_dev, torch.bfloat16) == torch.bfloat16
    assert resolve_kv_dtype(None, torch.device("cuda"), torch.float32) == torch.float32
    assert resolve_kv_dtype("float32", cpu_dev, torch.float32) == torch.float32
    assert resolve_kv_dtype("float16", cpu_dev, torch.float32) == torch.float16
    assert resolve_kv_dtype("bfloat16", cpu_dev, torch.float32) == torch.bfloat16
    with pytest.raises(ValueError, match="kv_dtype must be one of"):
        resolve_kv_dtype("int8", cpu_dev, torch.float32)
    with pytest.raises(ValueError, match="only the CPU path"):  # (a check of names only: no GPU needed)
        resolve_kv_dtype("float16", torch.device("cuda"), torch.bfloat16)
    assert resolve_kv_dtype("bfloat16", torch.device("cuda"), torch.bfloat16) == torch.bfloat16


@pytest.mark.parametrize("family", ["gemma3", "llama"])
def test_half_pages_hold_the_rounded_keys_and_stay_close_to_float32(tiny_folders, family):
    """With kv_dtype="float16" the pools are half; logits stay within the rounding's reach of
    float32 pages (measured 3.1e-3 gemma3, 1.2e-2 llama), a chunked prefill stays within a few half
    roundings of one chunk, and the prefix cache's fingerprint tells the two apart (no block
    computed with one served to the other)."""
    folder, _ = tiny_folders[family]
    ids = prompt(45, seed=5)
    f32, f16 = make_llm(folder), make_llm(folder, "float16")
    assert all(g.k.dtype == torch.float16 and g.v.dtype == torch.float16 for g in f16.kv.groups)
    assert all(g.k.dtype == torch.float32 for g in f32.kv.groups)
    assert f16.fingerprint != f32.fingerprint
    ref = f32.prompt_logits(ids)
    got = f16.prompt_logits(ids)
    diff = (got - ref).abs().max().item()
    assert 0 < diff < 5e-2, diff  # moved by the rounding, not by more
    for chunk in (3, 17):
        # every chunk reads the keys the pages hold; what remains are float32-level differences
        # between the chunkings (~1e-5, as with float32 pages) that flip a half rounding here and
        # there: measured up to 5.8e-4 (gemma3, chunks of 3) against 3.1e-3 for half against float32
        chunked = make_llm(folder, "float16", chunk=chunk).prompt_logits(ids)
        assert (chunked - got).abs().max().item() < 2e-3, chunk
    # greedy decoding through both (the C kernels' half pools where kv_f16(), else the torch path)
    params = SamplingParams(max_tokens=12)
    a = f16.generate([ids], params)[0].token_ids
    b = make_llm(folder, "float16").generate([ids], params)[0].token_ids
    assert a == b and len(a) == 12


@pytest.mark.skipif(not cpu.kv_f16(), reason="no F16C conversions on this CPU")
def test_decode_over_half_pages_takes_the_c_kernel_and_matches_the_torch_path(tiny_folders, monkeypatch):
    """Decode steps over half pools go through the C kernel (not the torch fallback) and give the
    torch path's tokens."""
    from engine.attention import backend as attention_backend

    folder, _ = tiny_folders["gemma3"]
    ids = prompt(30, seed=9)
    calls = []
    real = cpu.decode_attention

    def counting(*a, **kw):
        out = real(*a, **kw)
        calls.append(out is not None and a[1].dtype == torch.float16)
        return out

    monkeypatch.setattr(cpu, "decode_attention", counting)
    params = SamplingParams(max_tokens=10)
    with_kernel = make_llm(folder, "float16").generate([ids], params)[0].token_ids
    assert calls and all(calls)
    monkeypatch.setattr(attention_backend, "cpu_kernels", lambda: None)
    without = make_llm(folder, "float16").generate([ids], params)[0].token_ids
    assert with_kernel == without
