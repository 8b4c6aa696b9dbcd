"""The CPU decode step's C kernels (longdoc_kernels/cpu): built with the system compiler, each
against the torch path it replaces (float32, up to the order of sums), independent of the thread
count, refusing what they do not handle (a warm-tier or missing block id) so that the torch path
runs, and off with LONGDOC_CPU_KERNELS=0."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from engine.attention import backend as attention_backend
from engine.attention.backend import TorchAttentionBackend
from longdoc_kernels import cpu

pytestmark = pytest.mark.skipif(cpu.lib() is None, reason=f"C kernels not built here: {cpu.status()}")


@pytest.fixture
def kernels_off(monkeypatch):
    """The torch paths, as on a machine where the kernels cannot be built."""
    monkeypatch.setenv("LONGDOC_CPU_KERNELS", "0")
    cpu.reset()
    yield
    monkeypatch.delenv("LONGDOC_CPU_KERNELS")
    cpu.reset()


def test_off_switch_and_status(kernels_off):
    assert cpu.lib() is None and cpu.status() == "off (LONGDOC_CPU_KERNELS=0)"
    assert attention_backend.cpu_kernels() is None


def test_build_failure_is_a_status_not_an_error(monkeypatch, tmp_path):
    """A compiler that fails leaves the kernels off with the reason, and a warning, no exception."""
    fake = tmp_path / "cc"
    fake.write_text("#!/bin/sh\necho 'fake cc: cannot compile' >&2\nexit 1\n")
    fake.chmod(0o755)
    with monkeypatch.context() as m:
        m.setenv("CC", str(fake))
        m.setenv("LONGDOC_CACHE", str(tmp_path / "cache"))
        cpu.reset()
        try:
            with pytest.warns(UserWarning, match="cannot compile"):
                assert cpu.lib() is None
            assert cpu.status().startswith("off (building decode.c with") and "cannot compile" in cpu.status()
        finally:
            cpu.reset()
    assert cpu.lib() is not None


@pytest.mark.parametrize("shape", [(640,), (1, 640), (3, 640), (2, 7, 96)])
def test_rms_norm_matches_torch(shape):
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(*shape, generator=gen) * 3
    w = torch.randn(shape[-1], generator=gen)
    got = cpu.rms_norm(x, w, 1e-6)
    torch.testing.assert_close(got, F.rms_norm(x, (shape[-1],), w, 1e-6), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("t", [1, 3])
def test_rms_norm_of_strided_heads_with_a_weight_per_head(t):
    """q and k heads as a view of the fused projection [t, q+k+v heads * d], each head its own weight."""
    gen = torch.Generator().manual_seed(1)
    qkv = torch.randn(t, 6 * 32, generator=gen)
    qk = qkv[:, : 5 * 32].reshape(t, 5, 32)  # 4 q heads and 1 k head, rows strided by 6 * 32
    w = torch.randn(5, 32, generator=gen)
    got = cpu.rms_norm(qk, w, 1e-6)
    torch.testing.assert_close(got, F.rms_norm(qk, (32,), None, 1e-6) * w, rtol=1e-6, atol=1e-6)
    with pytest.raises(ValueError):
        cpu.rms_norm(qk, torch.randn(3, 32), 1e-6)  # 5 heads a row do not repeat 3 weight rows
    with pytest.raises(ValueError):
        cpu.rms_norm(qk.double(), w, 1e-6)


@pytest.mark.parametrize("second", [True, False])
def test_add_rms_norm_matches_torch(second):
    gen = torch.Generator().manual_seed(2)
    x, a = torch.randn(3, 64, generator=gen), torch.randn(3, 64, generator=gen) * 5
    w1, w2 = torch.randn(64, generator=gen), torch.randn(64, generator=gen)
    x_out, h_out = cpu.add_rms_norm(x, a, w1, w2 if second else None, 1e-6)
    want_x = x + F.rms_norm(a, (64,), w1, 1e-6)
    torch.testing.assert_close(x_out, want_x, rtol=1e-6, atol=1e-5)
    if second:
        torch.testing.assert_close(h_out, F.rms_norm(want_x, (64,), w2, 1e-6), rtol=1e-5, atol=1e-5)
    else:
        assert h_out is None


@pytest.mark.parametrize("k", [64, 72, 640, 4200])
@pytest.mark.parametrize("rows", [1, 4])
def test_int8_matmul_against_float64(k, rows):
    """Int8 rows times the activations as the kernel sees them (rounded to int16 a row where it
    does, `cpu.int16_rows`), scaled per row: float32-close to float64, the vector loop and its
    scalar tail (72 = 64 + 8), and more than one int32 span (4200 > 4096). Against the unrounded
    activations the error stays within the rounding's bound: half an int16 step of the row's
    largest value times the weight row's absolute sum."""
    gen = torch.Generator().manual_seed(8)
    q = torch.randint(-127, 128, (50, k), dtype=torch.int8, generator=gen)
    scale = torch.rand(50, generator=gen) + 0.01
    x = torch.randn(rows, k, generator=gen)
    x[0, 3] = 40.0  # an outlier: the row's int16 step is coarse for the rest
    got = cpu.int8_matmul(x, q, scale)
    w = q.double() * scale.double()[:, None]
    seen = cpu.int16_rows(x) if cpu.int16_activations() else x
    torch.testing.assert_close(got.double(), seen.double() @ w.T, rtol=1e-5, atol=1e-4)
    if cpu.int16_activations():
        assert not torch.equal(seen, x)
        step = x.abs().amax(-1, keepdim=True).double() / 32767
        bound = step / 2 * w.abs().sum(-1)[None, :] + 1e-4
        assert ((got.double() - x.double() @ w.T).abs() <= bound).all()
    with pytest.raises(ValueError):
        cpu.int8_matmul(x.bfloat16(), q, scale)


@pytest.mark.parametrize("k", [4096, 4200, 9000])
def test_int8_products_at_the_extremes_do_not_overflow(k):
    """Every weight at -128 or 127 and every activation at the row's maximum (int16 32767): the
    largest sums an int32 lane of the kernel can see, one span (4096) and more; the products equal
    the exact ones (float64) to float32's precision, for one row and for four at once."""
    q = torch.full((6, k), 127, dtype=torch.int8)
    q[1::2] = -128
    x = torch.ones(4, k)
    x[1] = -1.0
    got = cpu.int8_matmul(x, q, torch.ones(6))
    want = x.double() @ q.double().T
    torch.testing.assert_close(got.double(), want, rtol=1e-6, atol=0)
    assert torch.equal(got[1:2], cpu.int8_matmul(x[1:2], q, torch.ones(6)))


@pytest.mark.parametrize("k", [72, 640, 4200])
def test_int8_products_of_several_rows_equal_each_row_alone(k):
    """Rows multiplied together (up to four a pass over each weight row: a speculative verify's
    rows) give each row's product alone bit for bit, 1 to 7 rows (groups of 4, 3 and 2 and a lone
    tail), one int32 span and several, the int8 product and the MLP call, so a sequence's tokens do
    not depend on how many rows its step has."""
    gen = torch.Generator().manual_seed(k)
    q = torch.randint(-127, 128, (40, k), dtype=torch.int8, generator=gen)
    scale = torch.rand(40, generator=gen) + 0.01
    q_dn = torch.randint(-127, 128, (24, 20), dtype=torch.int8, generator=gen)
    s_dn = torch.rand(24, generator=gen) * 0.01
    x = torch.randn(7, k, generator=gen)
    alone = torch.cat([cpu.int8_matmul(x[i : i + 1], q, scale) for i in range(7)])
    mlp_alone = torch.cat([cpu.mlp_int8(x[i : i + 1], q, scale, q_dn, s_dn, True) for i in range(7)])
    for t in range(1, 8):
        assert torch.equal(cpu.int8_matmul(x[:t], q, scale), alone[:t]), t
        assert torch.equal(cpu.mlp_int8(x[:t], q, scale, q_dn, s_dn, True), mlp_alone[:t]), t


@pytest.mark.skipif(not cpu.int16_activations(), reason="the int8 products take float32 activations here")
def test_int16_rows_are_the_kernels_rounding():
    """The kernel's int16 activations are `int16_rows`: with weights of a single 1 its product
    returns them (each row's scale times its int16 values), a row of zeros included."""
    gen = torch.Generator().manual_seed(9)
    x = torch.randn(3, 80, generator=gen) * torch.tensor([[1.0], [1e-3], [0.0]])
    eye = torch.eye(80, dtype=torch.int8)
    got = cpu.int8_matmul(x, eye, torch.ones(80))
    assert torch.equal(got, cpu.int16_rows(x))
    assert torch.equal(got[2], torch.zeros(80))
    assert (got[0] - x[0]).abs().max() <= x[0].abs().max() / 32767 / 2 * 1.0001


def _pools(gen, blocks, bs, kvh, d):
    return torch.randn(blocks, bs, kvh, d, generator=gen), torch.randn(blocks, bs, kvh, d, generator=gen)


def _torch_decode(monkeypatch, *args, **kw):
    with monkeypatch.context() as m:
        m.setattr(attention_backend, "cpu_kernels", lambda: None)
        return TorchAttentionBackend().decode(*args, **kw).out


@pytest.mark.parametrize("h,kvh,d,bs,lens,window,softcap", [
    (4, 1, 256, 16, [1024], None, None),        # Gemma 3 270M's shape, a global layer
    (4, 1, 256, 16, [1024, 77], 512, None),     # its sliding layers, two sequences
    (8, 2, 64, 4, [37, 5, 300, 1], None, None),  # GQA groups of 4, chunks of 256 keys crossed
    (8, 8, 72, 1, [600, 2], 64, 50.0),          # no GQA, head_dim not a multiple of 16, soft-capping
    (6, 3, 128, 16, [257], None, None),         # a chunk of one key
    (12, 2, 80, 8, [300, 9], None, None),       # groups of 6 heads (4 + 2 in the weighted V), 80 = 64 + 16
    (3, 1, 64, 16, [100], None, None),          # a group of 3, softmax lengths off the 16-lane vector
])
def test_decode_attention_matches_the_torch_backend(monkeypatch, h, kvh, d, bs, lens, window, softcap):
    gen = torch.Generator().manual_seed(3)
    n_blocks = sum((n + bs - 1) // bs for n in lens) + 5
    kc, vc = _pools(gen, n_blocks, bs, kvh, d)
    widest = max((n + bs - 1) // bs for n in lens)
    perm = torch.randperm(n_blocks, generator=gen)  # each sequence's blocks scattered over the pool
    tables = torch.full((len(lens), widest), -1, dtype=torch.int64)
    used = 0
    for i, n in enumerate(lens):
        k = (n + bs - 1) // bs
        tables[i, :k] = perm[used : used + k]
        used += k
    q = torch.randn(len(lens), h, d, generator=gen)
    kv_lens = torch.tensor(lens)
    scale = d**-0.5
    got = cpu.decode_attention(q, kc, vc, tables, kv_lens, scale, window, softcap)
    want = _torch_decode(monkeypatch, q, kc, vc, tables, kv_lens, scale=scale, window=window, softcap=softcap)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    alone = cpu.decode_attention(q[1:2], kc, vc, tables[1:2], kv_lens[1:2], scale, window, softcap)
    assert torch.equal(alone, got[1:2])  # a sequence's result does not depend on its batch


@pytest.mark.skipif(not cpu.kv_f16(), reason="no F16C conversions on this CPU")
@pytest.mark.parametrize("h,kvh,d,bs,lens,window,softcap", [
    (4, 1, 256, 16, [1024, 300], None, None),   # Gemma 3 270M's global layer
    (4, 1, 256, 16, [700], 512, None),           # its sliding layers
    (8, 8, 72, 1, [600, 2], 64, 50.0),           # head_dim not a multiple of 16 (the scalar tails), soft-capping
    (12, 2, 80, 8, [300, 9], None, None),        # groups of 6 heads, 80 = 64 + 16
])
def test_decode_attention_over_half_pools_is_the_float32_arithmetic_of_their_values(h, kvh, d, bs, lens, window,
                                                                                    softcap):
    """16-bit pages (the CPU's default KV dtype where kv_f16()): the result equals, bit for bit, the
    float32 kernel's over float32 pools holding the same (half) values, with 1 and 2 threads."""
    gen = torch.Generator().manual_seed(7)
    widest = max((n + bs - 1) // bs for n in lens)
    n_blocks = len(lens) * widest + 3
    kc, vc = _pools(gen, n_blocks, bs, kvh, d)
    kh, vh = kc.half(), vc.half()
    tables = torch.randperm(n_blocks, generator=gen)[: len(lens) * widest].view(len(lens), widest)
    q = torch.randn(len(lens), h, d, generator=gen)
    threads = torch.get_num_threads()
    try:
        for nt in (1, 2):
            torch.set_num_threads(nt)
            got = cpu.decode_attention(q, kh, vh, tables, torch.tensor(lens), d**-0.5, window, softcap)
            want = cpu.decode_attention(q, kh.float(), vh.float(), tables, torch.tensor(lens), d**-0.5, window, softcap)
            assert got is not None and torch.equal(got, want), nt
    finally:
        torch.set_num_threads(threads)
    assert cpu.decode_attention(q, kh, vc, tables, torch.tensor(lens), d**-0.5) is None  # mixed pools: declined


def test_decode_attention_does_not_depend_on_threads():
    gen = torch.Generator().manual_seed(4)
    kc, vc = _pools(gen, 80, 16, 1, 256)
    tables = torch.randperm(80, generator=gen)[None, :70]
    q = torch.randn(1, 4, 256, generator=gen)
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = cpu.decode_attention(q, kc, vc, tables, torch.tensor([1100]), 0.0625)
        torch.set_num_threads(2)
        two = cpu.decode_attention(q, kc, vc, tables, torch.tensor([1100]), 0.0625)
    finally:
        torch.set_num_threads(threads)
    assert torch.equal(one, two)


@pytest.mark.parametrize("bad", [-2, -1, 99])
def test_decode_attention_refuses_blocks_outside_the_pool(bad):
    """A warm-tier entry (<= -2), a missing one (-1) or an id past the pool: None, the torch path runs."""
    gen = torch.Generator().manual_seed(5)
    kc, vc = _pools(gen, 10, 4, 1, 32)
    tables = torch.tensor([[0, 1, bad, 3]])
    q = torch.randn(1, 2, 32, generator=gen)
    assert cpu.decode_attention(q, kc, vc, tables, torch.tensor([14]), 0.2) is None
    assert cpu.decode_attention(q, kc, vc, tables, torch.tensor([8]), 0.2) is not None  # blocks 0-1 only
    assert cpu.decode_attention(q.double(), kc.double(), vc.double(), tables, torch.tensor([8]), 0.2) is None
    assert cpu.decode_attention(q, kc, vc, tables[:, :2], torch.tensor([9]), 0.2) is None  # table too short


def test_speculative_rows_are_computed_as_decode_steps(monkeypatch):
    """A few query rows at the end of a sequence (speculative verification): row i through the kernel
    equals the decode step at its position bit for bit, and the torch path within float32."""
    gen = torch.Generator().manual_seed(6)
    kc, vc = _pools(gen, 40, 16, 1, 64)
    table = torch.randperm(40, generator=gen)[:30]
    q = torch.randn(4, 2, 64, generator=gen)
    be = TorchAttentionBackend(few_rows=8)
    got = be.prefill(q, kc, vc, table, q_offset=400, kv_len=404, scale=0.125, window=128).out
    for i in range(4):
        step = cpu.decode_attention(q[i : i + 1], kc, vc, table[None], torch.tensor([401 + i]), 0.125, 128)
        assert torch.equal(got[i : i + 1], step)
    monkeypatch.setattr(attention_backend, "cpu_kernels", lambda: None)
    want = be.prefill(q, kc, vc, table, q_offset=400, kv_len=404, scale=0.125, window=128).out
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("h,kvh,d,first_len,rows,window", [
    (4, 1, 256, 1021, 4, None),   # Gemma 3's global layer: four rows share each chunk's K/V reads
    (8, 2, 64, 510, 5, None),     # lengths 510..514 cross a chunk edge (512): the last rows one chunk more
    (6, 3, 80, 300, 3, 4096),     # a window wider than the sequence: still one first key, grouped
    (4, 1, 64, 700, 4, 256),      # a window the rows pass: each row its own first key, not grouped
])
def test_rows_sharing_a_table_equal_each_row_alone(h, kvh, d, first_len, rows, window):
    """Rows of one sequence (one table row with stride 0, consecutive lengths: speculative drafts)
    are computed together, a chunk's K/V read once for all of them; each row's result is still the
    decode step's at its length, bit for bit, with one thread and two."""
    gen = torch.Generator().manual_seed(first_len)
    bs = 16
    n_blocks = (first_len + rows + bs - 1) // bs + 3
    kc, vc = _pools(gen, n_blocks, bs, kvh, d)
    table = torch.randperm(n_blocks, generator=gen)[: n_blocks - 3]
    q = torch.randn(rows, h, d, generator=gen)
    lens = torch.arange(first_len, first_len + rows)
    threads = torch.get_num_threads()
    try:
        for nt in (1, 2):
            torch.set_num_threads(nt)
            got = cpu.decode_attention(q, kc, vc, table[None].expand(rows, -1), lens, d**-0.5, window)
            for i in range(rows):
                alone = cpu.decode_attention(q[i : i + 1], kc, vc, table[None], lens[i : i + 1], d**-0.5, window)
                assert torch.equal(got[i : i + 1], alone), (nt, i)
    finally:
        torch.set_num_threads(threads)


def test_kernels_are_built_when_a_cpu_model_loads(monkeypatch, tmp_path):
    """Loading a model on the CPU builds (or rules out) the kernels, so the first request compiles
    nothing: a fresh cache folder holds the built library once load_model returns."""
    from engine.model.loader import load_model
    from tests.engine.tiny_models import tiny_hf_model

    folder = tmp_path / "tiny"
    tiny_hf_model("llama", seed=3).save_pretrained(folder)
    monkeypatch.setenv("LONGDOC_CACHE", str(tmp_path / "cache"))
    cpu.reset()
    try:
        load_model(folder, torch.device("cpu"), torch.float32)
        assert cpu._STATUS is not None and cpu._STATUS.startswith("ok:")
        assert list((tmp_path / "cache" / "cpu_kernels").glob("decode-*.so"))
    finally:
        cpu.reset()


@pytest.mark.parametrize("h,kvh,d,t,normed", [(4, 1, 256, 1, True), (8, 2, 64, 3, False), (3, 3, 128, 5, True)])
def test_qk_rope_write_equals_the_torch_ops(h, kvh, d, t, normed):
    """Norm (C rms_norm), rolled RoPE and index_copy_ into the pools, bit for bit, and nothing else
    of the pools touched; a slot outside the pool declines without writing."""
    from engine.model.rope import apply_rope_rolled

    gen = torch.Generator().manual_seed(h * d + t)
    qkv = torch.randn(t, (h + 2 * kvh) * d + 7, generator=gen)[:, : (h + 2 * kvh) * d]  # rows at a stride
    w = torch.rand(h + kvh, d, generator=gen) + 0.5 if normed else None
    cos, sin = torch.randn(t, d, generator=gen), torch.randn(t, d, generator=gen)
    k_cache, v_cache = torch.randn(6, 4, kvh, d, generator=gen), torch.randn(6, 4, kvh, d, generator=gen)
    slots = torch.randperm(24, generator=gen)[:t]
    qk = qkv[:, : (h + kvh) * d].reshape(t, h + kvh, d)
    if normed:
        qk = cpu.rms_norm(qk, w, 1e-6)
    want = apply_rope_rolled(qk, cos, sin)
    want_k, want_v = k_cache.clone(), v_cache.clone()
    want_k.view(-1, kvh, d).index_copy_(0, slots, want[:, h:])
    want_v.view(-1, kvh, d).index_copy_(0, slots, qkv[:, (h + kvh) * d :].reshape(t, kvh, d))
    k2, v2 = k_cache.clone(), v_cache.clone()
    got = cpu.qk_rope_write(qkv, h, kvh, w, 1e-6, cos, sin, k2, v2, slots)
    assert torch.equal(got, want) and torch.equal(k2, want_k) and torch.equal(v2, want_v)
    bad = slots.clone()
    bad[-1] = 24
    k3, v3 = k_cache.clone(), v_cache.clone()
    assert cpu.qk_rope_write(qkv, h, kvh, w, 1e-6, cos, sin, k3, v3, bad) is None
    assert torch.equal(k3, k_cache) and torch.equal(v3, v_cache)


@pytest.mark.skipif(not cpu.kv_f16(), reason="no F16C conversions on this CPU")
def test_qk_rope_write_into_half_pools_rounds_as_torch():
    """Half pools: the rotated k and the v rows written as torch's .half() rounds them (to nearest
    even), q and k returned in float32 as with float32 pools."""
    gen = torch.Generator().manual_seed(8)
    h, kvh, d, t = 4, 1, 256, 3
    qkv = torch.randn(t, (h + 2 * kvh) * d, generator=gen) * 30  # some values past half's 11 bits of precision
    w = torch.rand(h + kvh, d, generator=gen) + 0.5
    cos, sin = torch.randn(t, d, generator=gen), torch.randn(t, d, generator=gen)
    slots = torch.tensor([5, 0, 17])
    k32, v32 = torch.zeros(6, 4, kvh, d), torch.zeros(6, 4, kvh, d)
    want = cpu.qk_rope_write(qkv, h, kvh, w, 1e-6, cos, sin, k32, v32, slots)
    k16, v16 = torch.zeros(6, 4, kvh, d, dtype=torch.float16), torch.zeros(6, 4, kvh, d, dtype=torch.float16)
    got = cpu.qk_rope_write(qkv, h, kvh, w, 1e-6, cos, sin, k16, v16, slots)
    assert torch.equal(got, want)
    assert torch.equal(k16, k32.half()) and torch.equal(v16, v32.half())


def test_decode_steps_take_the_fused_rope_write(monkeypatch):
    """A CPU model's decode steps and short chunks go through qk_rope_write (one call per layer),
    and give the tokens of the path without it."""
    from engine.config import CacheConfig, SchedulerConfig
    from engine.core.sampling import SamplingParams
    from engine.model.loader.random_weights import hf_to_engine_config, llm_from_model, random_model
    from tests.engine.tiny_models import tiny_hf_config

    cfg = hf_to_engine_config(tiny_hf_config("gemma3"))
    model = random_model(cfg, torch.device("cpu"), torch.float32, seed=4)
    prompt = torch.randint(3, cfg.vocab_size, (21,), generator=torch.Generator().manual_seed(1)).tolist()
    params = SamplingParams(max_tokens=5, ignore_eos=True)
    calls = []
    real = cpu.qk_rope_write

    def spy(*a, **k):
        out = real(*a, **k)
        calls.append(out is not None)
        return out

    def run():
        llm = llm_from_model(model, cfg, device="cpu", dtype=torch.float32,
                             cache=CacheConfig(block_size=4, memory_budget=16 * 2**20),
                             scheduler=SchedulerConfig(max_prefill_chunk=16, num_speculative_tokens=0))
        return llm.generate([prompt], params)[0].token_ids

    monkeypatch.setattr(cpu, "qk_rope_write", spy)
    fused = run()
    layers = cfg.num_layers
    # every layer of every forward: at least the prompt's two chunks (16 + 5 rows) and 4 decode steps
    assert len(calls) % layers == 0 and len(calls) >= layers * (2 + 4) and all(calls)
    monkeypatch.setattr(cpu, "qk_rope_write", lambda *a, **k: None)  # declined: the torch ops
    assert run() == fused


@pytest.mark.parametrize("gelu", [True, False])
@pytest.mark.parametrize("t,k,f,n", [(1, 640, 2048, 640), (3, 96, 200, 72), (5, 33, 17, 9)])
def test_mlp_int8_matches_the_torch_mlp(gelu, t, k, f, n):
    """The MLP in one call against int8 products in float64 and torch's activation: float32-close
    (its exp is its own: not bit for bit), silu and gelu-tanh, widths off the vector size too; both
    products' activations rounded to int16 a row where the kernels do (`cpu.int16_rows`)."""
    gen = torch.Generator().manual_seed(t * 1000 + f)
    x = torch.randn(t, k, generator=gen) * 2
    q_gu = torch.randint(-127, 128, (2 * f, k), dtype=torch.int8, generator=gen)
    q_dn = torch.randint(-127, 128, (n, f), dtype=torch.int8, generator=gen)
    s_gu, s_dn = torch.rand(2 * f, generator=gen) * 0.01, torch.rand(n, generator=gen) * 0.01
    seen = cpu.int16_rows if cpu.int16_activations() else (lambda v: v)
    h = seen(x).double() @ (q_gu.double() * s_gu.double()[:, None]).T
    g, u = h[:, :f], h[:, f:]
    a = (F.gelu(g, approximate="tanh") if gelu else F.silu(g)) * u
    want = seen(a.float()).double() @ (q_dn.double() * s_dn.double()[:, None]).T
    got = cpu.mlp_int8(x, q_gu, s_gu, q_dn, s_dn, gelu)
    assert got.shape == (t, n) and got.dtype == torch.float32
    torch.testing.assert_close(got.double(), want, rtol=2e-5, atol=2e-5 * float(want.abs().max()))


def test_int8_model_mlp_takes_one_call(monkeypatch):
    """The int8 model's MLP on a decode step's rows is one C call, and without it (the torch
    path: gate/up product, activation, down product) the output is float32-close."""
    from engine.model.layers import MLP
    from engine.model.quant import Int8Linear, Int8Weight

    gen = torch.Generator().manual_seed(7)
    calls, real = [], cpu.mlp_int8

    def spy(*a):
        calls.append(1)
        return real(*a)

    class Cfg:
        hidden_size, intermediate_size, hidden_act = 64, 160, "gelu_tanh"

    for act in ("gelu_tanh", "silu"):
        Cfg.hidden_act = act
        mlp = MLP(Cfg)
        for lin in (mlp.gate_proj, mlp.up_proj, mlp.down_proj):
            lin.weight.data = torch.randn(lin.weight.shape, generator=gen) * 0.1
        mlp.fuse()
        mlp.gate_up = Int8Weight(mlp.gate_up, gemm=True)
        mlp.down_proj = Int8Linear(mlp.down_proj)
        x = torch.randn(2, 64, generator=gen)
        calls.clear()
        monkeypatch.setattr(cpu, "mlp_int8", spy)
        fused = mlp(x)
        monkeypatch.setattr(cpu, "mlp_int8", lambda *a: None)
        assert len(calls) == 1
        torch.testing.assert_close(fused, mlp(x), rtol=1e-5, atol=1e-5)
        monkeypatch.setattr(cpu, "mlp_int8", real)
