"""Weight-only INT8 on the CPU (engine/model/quant.py): tiny random models of two families (Gemma 3
with its tied embedding/output table, Llama with a separate output layer) loaded with
`LoadConfig(weights="int8")` against the same folder in float32."""

from __future__ import annotations

import pytest
import torch

from engine import LLM, CacheConfig, SamplingParams, SchedulerConfig
from engine.config import EngineConfig, LoadConfig
from engine.model.quant import Int8Weight, default_weights
from tests.engine.tiny_models import VOCAB


def make_llm(folder, weights: str) -> LLM:
    return LLM(config=EngineConfig(LoadConfig(model=folder, device="cpu", dtype="float32", weights=weights),
                                   CacheConfig(block_size=4, memory_budget=64 * 2**20),
                                   SchedulerConfig(max_model_len=512)))


def prompt(n: int, seed: int = 1) -> list[int]:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, VOCAB, (n,), generator=g).tolist()


def test_int8_weight_roundtrip_and_matmul():
    torch.manual_seed(0)
    w = torch.randn(96, 64)
    q = Int8Weight(w)
    assert q.q.dtype == torch.int8 and q.scale.shape == (96,)
    # every entry within half a step of its row's grid
    assert ((q.dequantize() - w).abs() <= q.scale[:, None] * 0.5 + 1e-6).all()
    x = torch.randn(5, 64)
    ref = x @ w.T
    err = (q.matmul(x) - ref).abs().max().item()
    assert err < 0.05 * ref.abs().max().item(), err
    ids = torch.tensor([3, 0, 95])
    assert torch.allclose(q.rows(ids, torch.float32), q.dequantize()[ids])


def test_default_weights():
    cpu, cuda = torch.device("cpu"), torch.device("cuda")
    assert default_weights(None, cpu, default_model=True) == "int8"
    assert default_weights(None, cpu, default_model=False) == "float"
    assert default_weights(None, cuda, default_model=True) == "float"
    assert default_weights("float", cpu, default_model=True) == "float"
    assert default_weights(None, cpu, default_model=True, dtype_given=True) == "float"  # dtype="float32" is float32
    with pytest.raises(ValueError):
        default_weights("int3", cpu, default_model=True)


@pytest.mark.parametrize("family", ["gemma3", "llama"])
def test_int8_logits_close_and_greedy_same(tiny_folders, family):
    folder, _ = tiny_folders[family]
    ref, q = make_llm(folder, "float"), make_llm(folder, "int8")
    assert q.weights == "int8" and q.model.qhead is not None
    assert q.model.model.embed_tokens.weight is None  # the float table is gone
    ids = prompt(40)
    a = ref.score(ids[:1], ids[1:]).logprobs
    b = q.score(ids[:1], ids[1:]).logprobs
    diffs = [abs(x - y) for x, y in zip(a, b, strict=True)]
    mean, rel = sum(diffs) / len(diffs), abs(sum(a) - sum(b)) / abs(sum(a))
    # measured: gemma3 mean 0.047 (max 0.21), total 0.14%; llama mean 0.080 (max 0.57), total 0.04%
    assert mean < 0.1 and rel < 0.01, (mean, rel)
    p = SamplingParams(max_tokens=16, ignore_eos=True)
    got, want = q.generate([ids[:8]], p)[0].token_ids, ref.generate([ids[:8]], p)[0].token_ids
    if family == "gemma3":  # the default model's family: the same 16 greedy tokens
        assert got == want
    elif got != want:  # the random llama has near ties: where the runs part, float32 nearly tied
        i = next(k for k, (x, y) in enumerate(zip(got, want, strict=True)) if x != y)
        ctx = ids[:8] + want[:i]
        margin = ref.score(ctx, [want[i]]).logprobs[0] - ref.score(ctx, [got[i]]).logprobs[0]
        assert 0 <= margin < 0.2, margin  # measured: token 0, margin 0.095


@pytest.mark.parametrize("rows", [1, 15, 16, 300])
def test_many_rows_take_the_bfloat16_gemm(monkeypatch, rows):
    """From GEMM_ROWS rows a layer weight multiplies through its bfloat16 copy (where the CPU has
    bfloat16 GEMMs; forced on here): the int8 kernel's result within bfloat16 rounding; fewer rows,
    and the output layer, stay on the int8 kernel bit for bit."""
    from engine.model import quant

    monkeypatch.setattr(quant, "cpu_kernels", lambda: None)  # the C kernel's few rows: test_few_rows_take_the_c_kernel
    monkeypatch.setattr(quant, "_BF16_GEMM", True)
    gen = torch.Generator().manual_seed(2)
    w = torch.randn(96, 64, generator=gen)
    x = torch.randn(rows, 64, generator=gen)
    layer, head = Int8Weight(w, gemm=True), Int8Weight(w)
    ref = torch._weight_int8pack_mm(x.to(torch.bfloat16), layer.q, layer.scale_bf16).float()
    got = layer.matmul(x)
    assert torch.equal(head.matmul(x), ref) and head.w16 is None
    if rows < quant.GEMM_ROWS:
        assert torch.equal(got, ref) and layer.w16 is None
    else:
        assert layer.w16 is not None and layer.nbytes == 96 * 64 * 3 + 10 * 96
        torch.testing.assert_close(got, ref, rtol=2**-7, atol=2**-7 * ref.abs().max().item())
    monkeypatch.setattr(quant, "_BF16_GEMM", False)
    monkeypatch.setattr(quant, "_FP32_GEMM", False)
    assert torch.equal(Int8Weight(w, gemm=True).matmul(x), ref)  # neither GEMM: the int8 kernel


@pytest.mark.parametrize("rows", [1, 16, 63, 64, 300])
def test_many_rows_take_the_float32_gemm_without_bfloat16(monkeypatch, rows):
    """A CPU without bfloat16 GEMMs (AVX2): from FP32_GEMM_ROWS rows a layer weight multiplies as
    float32, dequantised on the fly to exactly the int8 kernel's weights, with float32 activations
    (no copy kept); fewer rows, and the output layer, stay on the int8 kernel bit for bit."""
    from engine.model import quant

    monkeypatch.setattr(quant, "cpu_kernels", lambda: None)  # the C kernel's few rows: test_few_rows_take_the_c_kernel
    monkeypatch.setattr(quant, "_BF16_GEMM", False)
    monkeypatch.setattr(quant, "_FP32_GEMM", None)
    monkeypatch.delenv("LONGDOC_CPU_FP32_GEMM", raising=False)
    assert quant.fp32_gemm()  # the default where bfloat16 GEMMs are not
    gen = torch.Generator().manual_seed(5)
    w = torch.randn(96, 64, generator=gen)
    x = torch.randn(rows, 64, generator=gen)
    layer, head = Int8Weight(w, gemm=True), Int8Weight(w)
    ref = torch._weight_int8pack_mm(x.to(torch.bfloat16), layer.q, layer.scale_bf16).float()
    exact = x.double() @ (layer.q.double() * layer.scale_bf16.double()[:, None]).T
    got = layer.matmul(x)
    assert torch.equal(head.matmul(x), ref)
    if rows < quant.FP32_GEMM_ROWS:
        assert torch.equal(got, ref)
    else:
        assert not torch.equal(got, ref) and layer.w16 is None and layer.nbytes == 96 * 64 + 10 * 96
        torch.testing.assert_close(got.double(), exact, rtol=1e-5, atol=1e-4)  # float32, not bfloat16
        assert (got.double() - exact).abs().max() < (ref.double() - exact).abs().max()
    monkeypatch.setattr(quant, "_FP32_GEMM", None)
    monkeypatch.setenv("LONGDOC_CPU_FP32_GEMM", "0")
    assert not quant.fp32_gemm() and torch.equal(Int8Weight(w, gemm=True).matmul(x), ref)


def test_prefill_attention_in_bfloat16_is_close_and_decode_is_not_cast(monkeypatch):
    from engine.attention.backend import TorchAttentionBackend
    from engine.attention.triton_backend import default_backend
    from engine.model import quant

    gen = torch.Generator().manual_seed(3)
    k_cache = torch.randn(8, 4, 2, 32, generator=gen)
    v_cache = torch.randn(8, 4, 2, 32, generator=gen)
    table = torch.arange(8)
    q = torch.randn(20, 4, 32, generator=gen)
    f32, b16 = TorchAttentionBackend(), TorchAttentionBackend(sdpa_dtype=torch.bfloat16)
    kw = dict(q_offset=12, kv_len=32, scale=32 ** -0.5)
    a, b = f32.prefill(q, k_cache, v_cache, table, **kw).out, b16.prefill(q, k_cache, v_cache, table, **kw).out
    assert b.dtype == torch.float32 and not torch.equal(a, b)
    torch.testing.assert_close(a, b, rtol=0, atol=3e-2)
    one = dict(q_offset=31, kv_len=32, scale=32 ** -0.5)  # a decode row: float32 all the way
    assert torch.equal(f32.prefill(q[:1], k_cache, v_cache, table, **one).out,
                       b16.prefill(q[:1], k_cache, v_cache, table, **one).out)
    monkeypatch.setattr(quant, "_BF16_GEMM", True)
    assert default_backend(torch.device("cpu"), "int8").sdpa_dtype == torch.bfloat16
    assert default_backend(torch.device("cpu"), "float").sdpa_dtype is None
    monkeypatch.setattr(quant, "_BF16_GEMM", False)
    assert default_backend(torch.device("cpu"), "int8").sdpa_dtype is None


@pytest.mark.parametrize("rows", [1, 3, 15, 63])
def test_few_rows_take_the_c_kernel(monkeypatch, rows):
    """A layer's products under the GEMM thresholds go through the C kernel where it is built:
    float32 activations (or rounded to int16 a row, `cpu.int16_rows`), closer to the float64
    product than the bfloat16-activation kernel, each row as it is alone; the output layer, and
    LONGDOC_CPU_KERNELS=0, keep `_weight_int8pack_mm` bit for bit."""
    from engine.model import quant
    from longdoc_kernels import cpu

    if cpu.lib() is None:
        pytest.skip(f"C kernels not built here: {cpu.status()}")
    gen = torch.Generator().manual_seed(7)
    w = torch.randn(96, 64, generator=gen)  # (torch's int8 kernel reads past rows of 72: whole vectors only)
    x = torch.randn(rows, 64, generator=gen) * 4
    layer, head = Int8Weight(w, gemm=True), Int8Weight(w)
    ref = torch._weight_int8pack_mm(x.to(torch.bfloat16), layer.q, layer.scale_bf16).float()
    exact = x.double() @ (layer.q.double() * layer.scale_bf16.double()[:, None]).T
    monkeypatch.setattr(quant, "_BF16_GEMM", False)
    monkeypatch.setattr(quant, "_FP32_GEMM", False)
    got = layer.matmul(x)
    assert torch.equal(head.matmul(x), ref)
    seen = cpu.int16_rows(x) if cpu.int16_activations() else x
    torch.testing.assert_close(got.double(), seen.double() @ (layer.q.double() * layer.scale_bf16.double()[:, None]).T,
                               rtol=1e-5, atol=1e-4)
    assert (got.double() - exact).abs().max() < (ref.double() - exact).abs().max() / 10
    assert torch.equal(got[-1:], layer.matmul(x[-1:]))  # a row's result does not depend on the others
    monkeypatch.setattr(quant, "cpu_kernels", lambda: None)
    assert torch.equal(layer.matmul(x), ref)
