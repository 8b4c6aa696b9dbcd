"""The Triton kernels on a real GPU at real shapes (bf16), against float32 references.

Tolerances (relative Frobenius error ||out - ref|| / ||ref||, bf16 inputs, float32 accumulation):
prefill and decode outputs < 1e-2, log-sum-exp within 2e-2 absolute. INT8 decode compares with the
float32 reference over the same dequantised values (< 1e-2), and the long-context needle test checks
that INT8 keeps the needle's attention weight within 5% of bf16's at 128K tokens.
"""

from __future__ import annotations

import pytest
import torch

from longdoc_kernels import reference as ref

pytestmark = pytest.mark.gpu
DEV = "cuda"


def rel(a, b):
    return float((a.float() - b.float()).norm() / b.float().norm().clamp_min(1e-12))


def paged(n_tokens, bs, kvh, d, dtype, gen, n_seqs=1):
    n = (n_tokens + bs - 1) // bs
    k = torch.randn(n * n_seqs + 4, bs, kvh, d, generator=gen, device=DEV).to(dtype)
    v = torch.randn(n * n_seqs + 4, bs, kvh, d, generator=gen, device=DEV).to(dtype)
    perm = torch.randperm(n * n_seqs + 4, generator=gen, device=DEV)[: n * n_seqs].to(torch.int32)
    return k, v, perm.view(n_seqs, n)


@pytest.mark.parametrize(
    "h, kvh, d, t, q_offset, window",
    [(4, 1, 256, 4096, 0, 512), (4, 1, 256, 4096, 0, None), (32, 8, 128, 2048, 2048, None), (16, 16, 64, 1024, 512, 256)],
)
def test_prefill_real_shapes(h, kvh, d, t, q_offset, window):
    from longdoc_kernels.paged_attention import paged_prefill

    gen = torch.Generator(device=DEV).manual_seed(0)
    n = q_offset + t
    k, v, table = paged(n, 16, kvh, d, torch.bfloat16, gen)
    q = torch.randn(t, h, d, generator=gen, device=DEV).to(torch.bfloat16)
    out, lse = paged_prefill(q, k, v, table[0], q_offset=q_offset, kv_len=n, scale=d**-0.5, window=window)
    r_out, r_lse = ref.paged_prefill(q.float(), k, v, table[0], q_offset=q_offset, kv_len=n, scale=d**-0.5, window=window)
    assert rel(out, r_out) < 1e-2
    assert float((lse - r_lse).abs().max()) < 2e-2


@pytest.mark.parametrize("h, kvh, d, window", [(32, 8, 128, None), (4, 1, 256, None), (4, 1, 256, 512)])
def test_prefill_varlen_real_shapes(h, kvh, d, window):
    """40 questions' chunks (17 to 300 rows) over 8K-token cached documents in one launch, and 3 in a
    launch that splits the keys, against the float32 reference chunk by chunk."""
    from longdoc_kernels.paged_attention import paged_prefill_varlen

    gen = torch.Generator(device=DEV).manual_seed(3)
    bs, ctx = 16, 8192
    for n_items in (40, 3):
        lens = torch.randint(17, 301, (n_items,), generator=gen, device=DEV).tolist()
        k, v, table = paged(ctx + 320, bs, kvh, d, torch.bfloat16, gen, n_seqs=n_items)
        items, start = [], 0
        for i, n in enumerate(lens):
            items.append((start, n, ctx + (i % 7)))
            start += n
        q = torch.randn(start, h, d, generator=gen, device=DEV).to(torch.bfloat16)
        out, lse = paged_prefill_varlen(q, k, v, table, items, scale=d**-0.5, window=window)
        r_out, r_lse = ref.paged_prefill_varlen(q.float(), k, v, table, items, scale=d**-0.5, window=window,
                                                out=torch.empty(q.shape, device=DEV))
        assert rel(out, r_out) < 1e-2, n_items
        assert float((lse - r_lse).abs().max()) < 2e-2, n_items


@pytest.mark.parametrize("int8", [False, True])
@pytest.mark.parametrize("h, kvh, d", [(32, 8, 128), (4, 1, 256)])
def test_decode_ragged_batch(int8, h, kvh, d):
    from longdoc_kernels.kv_quant import quantize_blocks
    from longdoc_kernels.paged_attention import paged_decode

    gen = torch.Generator(device=DEV).manual_seed(1)
    bs = 16
    lens = torch.tensor([1, 100, 5000, 32768], device=DEV, dtype=torch.int32)
    k, v, table = paged(32768, bs, kvh, d, torch.bfloat16, gen, n_seqs=4)
    tables = table.clone()
    nb = (lens + bs - 1) // bs
    for b in range(4):
        tables[b, int(nb[b]):] = -1
    kw = {}
    rk, rv = k, v
    if int8:
        kq, ks = quantize_blocks(k)
        vq, vs = quantize_blocks(v)
        tables = torch.where((tables >= 0) & (torch.arange(tables.shape[1], device=DEV) % 3 != 0), -tables - 2, tables)
        kw = dict(k_cache_int8=kq, v_cache_int8=vq, k_scale=ks, v_scale=vs)
    q = torch.randn(4, h, d, generator=gen, device=DEV).to(torch.bfloat16)
    r_out, r_lse = ref.paged_decode(q.float(), rk, rv, tables, lens, scale=d**-0.5, **kw)
    # the tuned launch (no split/tile given), and with INT8 pages every loop mode explicitly
    variants = [{}] + ([dict(int8_mode=m) for m in (2, 3, 4)] + [dict(int8_mode=4, int8_conv=c) for c in (1, 2)]
                       + [dict(int8_mode=4, block_n=64, block_n_warm=128)] if int8 else [])
    for extra in variants:
        out, lse = paged_decode(q, k, v, tables, lens, scale=d**-0.5, **kw, **extra)
        assert rel(out, r_out) < 1e-2, extra
        assert float((lse - r_lse).abs().max()) < 2e-2, extra


def test_int8_needle_at_128k():
    """One key at 128K tokens aligned with the query carries a large share of attention; INT8 warm
    blocks must keep that share within 5% of the bf16 cache's (accumulation precision matters here)."""
    from longdoc_kernels.kv_quant import quantize_blocks
    from longdoc_kernels.paged_attention import paged_decode

    gen = torch.Generator(device=DEV).manual_seed(2)
    h, kvh, d, bs, n = 8, 1, 128, 16, 131072
    k, v, table = paged(n, bs, kvh, d, torch.bfloat16, gen)
    q0 = torch.randn(d, generator=gen, device=DEV)
    q = q0.expand(1, h, d).contiguous()
    needle = 77_777
    blk, off = int(table[0, needle // bs]), needle % bs
    # score of the needle = scale * q.k = 14, against ~N(0, 1) for the 131071 others
    k[blk, off, 0] = (q0 * 14.0 * d**0.5 / q0.norm() ** 2).to(torch.bfloat16)
    v[:] = 0
    v[blk, off, 0] = 1.0
    lens = torch.tensor([n], device=DEV, dtype=torch.int32)
    out_bf16, _ = paged_decode(q.to(torch.bfloat16), k, v, table, lens, scale=d**-0.5)
    kq, ks = quantize_blocks(k)
    vq, vs = quantize_blocks(v)
    warm = -table - 2
    w_bf16 = out_bf16.float().mean(-1)  # attention weight on the needle (v is one-hot there)
    assert float(w_bf16.min()) > 0.01  # the needle is really attended to
    for conv in (0, 1, 2):  # every way the warm-only loop feeds int8 to the tensor cores
        out_int8, _ = paged_decode(q.to(torch.bfloat16), k, v, warm, lens, scale=d**-0.5, k_cache_int8=kq,
                                   v_cache_int8=vq, k_scale=ks, v_scale=vs, int8_mode=4, int8_conv=conv)
        w_int8 = out_int8.float().mean(-1)
        assert float(((w_int8 - w_bf16).abs() / w_bf16).max()) < 0.05, conv


@pytest.mark.parametrize("gemma, shape", [(False, (4096, 4096)), (True, (512, 640)), (True, (512, 4, 256))])
def test_rms_norm_real_shapes(gemma, shape):
    """Fused RMSNorm against the torch arithmetic it replaces: bf16 outputs may differ by one rounding
    step in rare elements (the mean's summation order), so the bound is 1e-2 relative elementwise."""
    from longdoc_kernels.rmsnorm import rms_norm

    gen = torch.Generator(device=DEV).manual_seed(6)
    d = shape[-1]
    x = torch.randn(*shape, generator=gen, device=DEV).to(torch.bfloat16)
    w = torch.randn(d, generator=gen, device=DEV) * 0.2
    weight = (1.0 + w) if gemma else w.to(torch.bfloat16)
    got, want = rms_norm(x, weight, 1e-6, gemma), ref.rms_norm(x, weight, 1e-6, gemma)
    torch.testing.assert_close(got.float(), want.float(), atol=1e-2, rtol=1e-2)
    assert float((got != want).float().mean()) < 0.01


def test_fused_kernels_past_int32_offsets():
    """A 128K-token prefill of the 8B shape gives act_mul a [131072, 2 x 14336] input whose element
    offsets pass 2**31 (an illegal address before the row index was widened). Rows past the limit
    are checked against the reference; the residual-add-norm kernel too."""
    from longdoc_kernels.fused import act_mul, add_rms_norm

    rows, f = 75_000, 14_336  # 75000 x 28672 elements > 2**31
    gen = torch.Generator(device=DEV).manual_seed(3)
    gu = torch.randn(rows, 2 * f, generator=gen, device=DEV, dtype=torch.bfloat16)
    y = act_mul(gu, gelu=False)
    tail = slice(rows - 64, rows)
    torch.testing.assert_close(y[tail], ref.act_mul(gu[tail], False), atol=2e-2, rtol=2e-2)
    del gu, y
    x = torch.randn(rows, 4096, generator=gen, device=DEV, dtype=torch.bfloat16)
    h = torch.randn_like(x)
    w = torch.rand(4096, generator=gen, device=DEV) + 0.5
    xo, yn = add_rms_norm(x, h, None, w, 1e-5, gemma=False)
    torch.testing.assert_close(xo[tail], x[tail] + h[tail], atol=0, rtol=0)
    assert torch.isfinite(yn[tail]).all()


@pytest.mark.parametrize("h, kvh, d", [(32, 8, 128), (4, 1, 256)])
def test_paged_kernels_past_int32_pool_offsets(h, kvh, d):
    """Pools of more than 2**31 elements (bf16 K and V, INT8 K and V) with block tables pointing
    at their last blocks: prefill, decode (the tuned launch, whose tuner reads blocks spread
    through the whole pool, and each INT8 loop mode), INT8 quantisation of the whole pool, and
    RoPE's cache write into the last block, against the torch reference. Before the block ids were
    widened to 64 bits the tuner's launches hit an illegal memory access here."""
    from longdoc_kernels.kv_quant import quantize_blocks
    from longdoc_kernels.paged_attention import paged_decode, paged_prefill
    from longdoc_kernels.rope_kv import rope_and_cache_write

    bs = 16
    n_blocks = (1 << 31) // (bs * kvh * d) + 64  # each pool tensor > 2**31 elements
    gen = torch.Generator(device=DEV).manual_seed(4)
    k = torch.randn(n_blocks, bs, kvh, d, generator=gen, device=DEV, dtype=torch.bfloat16)
    v = torch.randn(n_blocks, bs, kvh, d, generator=gen, device=DEV, dtype=torch.bfloat16)
    assert k.numel() > 2**31
    n_ctx = 40 * bs
    last = torch.arange(n_blocks - 40, n_blocks, device=DEV, dtype=torch.int32).flip(0)
    q = torch.randn(n_ctx, h, d, generator=gen, device=DEV).to(torch.bfloat16)
    out, lse = paged_prefill(q, k, v, last, q_offset=0, kv_len=n_ctx, scale=d**-0.5)
    r_out, r_lse = ref.paged_prefill(q.float(), k, v, last, q_offset=0, kv_len=n_ctx, scale=d**-0.5)
    assert rel(out, r_out) < 1e-2
    assert float((lse - r_lse).abs().max()) < 2e-2

    kq, ks = quantize_blocks(k)  # every block, the last ones included
    vq, vs = quantize_blocks(v)
    lb = n_blocks - 1
    assert float((kq[lb].float() * ks[lb][None, :, None] - k[lb].float()).abs().max()) <= float(ks[lb].max()) / 2 + 1e-6
    lens = torch.tensor([n_ctx, n_ctx - 7], device=DEV, dtype=torch.int32)
    tables = torch.stack([last, last.flip(0)])
    qd = torch.randn(2, h, d, generator=gen, device=DEV).to(torch.bfloat16)
    for int8 in (False, True):
        kw = dict(k_cache_int8=kq, v_cache_int8=vq, k_scale=ks, v_scale=vs) if int8 else {}
        tabs = torch.where(torch.arange(40, device=DEV) % 3 != 0, -tables - 2, tables) if int8 else tables
        r_out, r_lse = ref.paged_decode(qd.float(), k, v, tabs, lens, scale=d**-0.5, **kw)
        for extra in [{}] + ([dict(int8_mode=m) for m in (2, 3, 4)] if int8 else []):
            out, lse = paged_decode(qd, k, v, tabs, lens, scale=d**-0.5, **kw, **extra)
            assert rel(out, r_out) < 1e-2, (int8, extra)
            assert float((lse - r_lse).abs().max()) < 2e-2, (int8, extra)
    del kq, vq

    t = 4
    qr = torch.randn(t, h, d, generator=gen, device=DEV).to(torch.bfloat16)
    kr = torch.randn(t, kvh, d, generator=gen, device=DEV).to(torch.bfloat16)
    vr = torch.randn(t, kvh, d, generator=gen, device=DEV).to(torch.bfloat16)
    ang = torch.rand(t, d // 2, generator=gen, device=DEV) * 6
    slots = lb * bs + torch.arange(t, device=DEV) * 3
    rope_and_cache_write(qr, kr, vr, ang.cos(), ang.sin(), k, v, slots)
    rk, rv = torch.zeros(1, bs, kvh, d, device=DEV), torch.zeros(1, bs, kvh, d, device=DEV)
    ref.rope_and_cache_write(qr.float(), kr.float(), vr.float(), ang.cos(), ang.sin(), rk, rv, slots - lb * bs)
    written = slots - lb * bs
    torch.testing.assert_close(k[lb, written].float(), rk[0, written], atol=2e-2, rtol=2e-2)
    torch.testing.assert_close(v[lb, written].float(), rv[0, written], atol=2e-2, rtol=2e-2)


@pytest.mark.parametrize("h, kvh, d, window", [(4, 1, 256, None), (4, 1, 256, 512), (32, 8, 128, None)])
def test_prefill_reads_int8_pages_real_shapes(h, kvh, d, window):
    """A 1,024-row chunk after an 8K prefix whose middle blocks are INT8 warm pages: the kernel
    reading the pages directly (at the stage count it runs with by default) against the float32
    reference over the same dequantised values."""
    from longdoc_kernels.kv_quant import quantize_blocks
    from longdoc_kernels.paged_attention import paged_prefill

    gen = torch.Generator(device=DEV).manual_seed(4)
    tq, ctx = 1024, 9216
    k, v, table = paged(ctx, 16, kvh, d, torch.bfloat16, gen)
    kq, ks = quantize_blocks(k)
    vq, vs = quantize_blocks(v)
    row = table[0].clone()
    warm = torch.arange(1, (ctx - tq) // 16 - 16, device=DEV)
    row[warm] = -row[warm] - 2
    q = torch.randn(tq, h, d, generator=gen, device=DEV).to(torch.bfloat16)
    kw = dict(q_offset=ctx - tq, kv_len=ctx, scale=d**-0.5, window=window,
              k_cache_int8=kq, v_cache_int8=vq, k_scale=ks, v_scale=vs)
    out, lse = paged_prefill(q, k, v, row, **kw)
    r_out, r_lse = ref.paged_prefill(q.float(), k, v, row, **kw)
    assert rel(out, r_out) < 1e-2
    assert float((lse - r_lse).abs().max()) < 2e-2
