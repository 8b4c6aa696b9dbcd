"""Every Triton kernel against its torch reference, on the CPU through TRITON_INTERPRET=1.

Shapes are small (the interpreter is ~1000x slower than torch) but cover what matters: GQA and
MQA, head_dim 64 and a non-power-of-two 80, block sizes 4 and 8, sliding windows that free blocks,
a chunked prefill's query offset, ragged decode batches, INT8 warm blocks mixed with hot ones,
soft-capping. Tolerances: float32 everywhere, 2e-4 absolute on outputs and log-sum-exp.
"""

from __future__ import annotations

import math

import pytest
import torch

from longdoc_kernels import reference as ref

pytestmark = pytest.mark.skipif(torch.cuda.is_available(), reason="interpreter tests run on the CPU")
ATOL = 2e-4


def make_cache(n_blocks, bs, kvh, d, gen):
    k = torch.randn(n_blocks, bs, kvh, d, generator=gen)
    v = torch.randn(n_blocks, bs, kvh, d, generator=gen)
    return k, v


def table_for(n_tokens, bs, n_blocks, gen, freed_before: int = 0):
    """A random permutation of physical blocks for one sequence; blocks wholly before position
    `freed_before` are marked freed (-1), as a sliding window leaves them."""
    n = (n_tokens + bs - 1) // bs
    perm = torch.randperm(n_blocks, generator=gen)[:n].to(torch.int32)
    for j in range(n):
        if (j + 1) * bs <= freed_before:
            perm[j] = -1
    return perm


@pytest.mark.parametrize(
    "h, kvh, d, bs, tq, q_offset, window, softcap",
    [
        (4, 1, 64, 8, 23, 0, None, None),  # MQA, one-shot prefill
        (4, 2, 64, 4, 9, 17, None, None),  # GQA, a later chunk of a chunked prefill
        (2, 2, 80, 8, 30, 10, 12, None),  # sliding window over freed blocks, odd head_dim
        (4, 1, 64, 8, 16, 0, None, 30.0),  # soft-capping
    ],
)
def test_prefill_matches_reference(h, kvh, d, bs, tq, q_offset, window, softcap):
    from longdoc_kernels.paged_attention import paged_prefill

    gen = torch.Generator().manual_seed(h * 100 + d + tq)
    kv_len = q_offset + tq
    k_cache, v_cache = make_cache(16, bs, kvh, d, gen)
    freed = max(0, q_offset - (window or 10**9)) if window else 0
    table = table_for(kv_len, bs, 16, gen, freed_before=freed)
    # poison the freed blocks: reading them would show as NaN
    q = torch.randn(tq, h, d, generator=gen)
    scale = 1 / math.sqrt(d)
    out, lse = paged_prefill(q, k_cache, v_cache, table, q_offset=q_offset, kv_len=kv_len, scale=scale, window=window, softcap=softcap)
    r_out, r_lse = ref.paged_prefill(q, k_cache, v_cache, table, q_offset=q_offset, kv_len=kv_len, scale=scale, window=window, softcap=softcap)
    assert torch.isfinite(out).all()
    torch.testing.assert_close(out, r_out, atol=ATOL, rtol=0)
    torch.testing.assert_close(lse, r_lse, atol=ATOL, rtol=0)


@pytest.mark.parametrize(
    "h, kvh, d, bs, tq, q_offset, window, softcap, splits",
    [
        (4, 1, 64, 8, 3, 90, None, None, 3),  # a question's few rows over a long cached document
        (4, 2, 64, 4, 20, 70, None, None, 5),  # two query tiles, more splits than some tiles have
        (2, 2, 80, 8, 9, 60, 24, None, 2),  # a sliding window: the runs start at the window
        (4, 1, 64, 8, 5, 40, None, 30.0, 7),  # soft-capping; splits past the tiles there are (empty runs)
    ],
)
def test_prefill_split_over_the_keys_matches_reference(h, kvh, d, bs, tq, q_offset, window, softcap, splits):
    """Key splits (a few rows over a long context) give the one-program result after the merge."""
    from longdoc_kernels.paged_attention import paged_prefill

    gen = torch.Generator().manual_seed(h * 10 + tq + splits)
    kv_len = q_offset + tq
    n_blocks = (kv_len + bs - 1) // bs + 4
    k_cache, v_cache = make_cache(n_blocks, bs, kvh, d, gen)
    freed = max(0, q_offset - window) if window else 0
    table = table_for(kv_len, bs, n_blocks, gen, freed_before=freed)
    q = torch.randn(tq, h, d, generator=gen)
    scale = 1 / math.sqrt(d)
    kw = dict(q_offset=q_offset, kv_len=kv_len, scale=scale, window=window, softcap=softcap)
    out, lse = paged_prefill(q, k_cache, v_cache, table, n_splits=splits, **kw)
    one, one_lse = paged_prefill(q, k_cache, v_cache, table, n_splits=1, **kw)
    r_out, r_lse = ref.paged_prefill(q, k_cache, v_cache, table, **kw)
    assert torch.isfinite(out).all() and torch.isfinite(lse).all()
    torch.testing.assert_close(out, r_out, atol=ATOL, rtol=0)
    torch.testing.assert_close(lse, r_lse, atol=ATOL, rtol=0)
    torch.testing.assert_close(out, one, atol=ATOL, rtol=0)


@pytest.mark.parametrize(
    "kvh, window, softcap, splits",
    [
        (1, None, None, 1),  # MQA, one program per (tile, head)
        (2, None, None, 3),  # GQA, key splits merged over the chunks' rows
        (2, 12, None, 2),  # a sliding window over freed blocks
        (1, None, 30.0, 1),  # soft-capping
    ],
)
def test_prefill_varlen_matches_reference(kvh, window, softcap, splits):
    """Several sequences' chunks in one launch: a question's few rows over a long cached prefix, a
    first chunk, a chunk of two query tiles, an empty chunk; each chunk equals its own reference,
    rows outside the chunks are left as they were."""
    from longdoc_kernels.paged_attention import paged_prefill_varlen

    h, d, bs, n_blocks = 4, 64, 8, 64
    gen = torch.Generator().manual_seed(kvh * 31 + splits + (window or 0))
    k_cache, v_cache = make_cache(n_blocks, bs, kvh, d, gen)
    # (rows, q_offset) per chunk; a padding row between chunks 1 and 2 belongs to no chunk
    chunks = [(3, 90), (11, 0), (20, 37), (0, 12), (5, 0)]
    items, tables, start = [], [], 0
    perm = torch.randperm(n_blocks, generator=gen).to(torch.int32)
    used = 0
    width = max((off + n + bs - 1) // bs for n, off in chunks)
    for i, (n, off) in enumerate(chunks):
        kv_len = off + n
        nb = (kv_len + bs - 1) // bs
        row = torch.full((width,), -1, dtype=torch.int32)
        row[:nb] = perm[used : used + nb] if used + nb <= n_blocks else torch.randperm(n_blocks, generator=gen)[:nb]
        used += nb
        if window:
            for j in range(nb):
                if (j + 1) * bs <= max(0, off - window):
                    row[j] = -1
        tables.append(row)
        items.append((start, n, off))
        start += n + (1 if i == 1 else 0)
    tables = torch.stack(tables)
    q = torch.randn(start, h, d, generator=gen)
    scale = 1 / math.sqrt(d)
    out = torch.full_like(q, 7.0)
    lse = torch.full((start, h), 7.0)
    paged_prefill_varlen(q, k_cache, v_cache, tables, items, scale=scale, window=window, softcap=softcap,
                         out=out, lse=lse, n_splits=splits)
    r_out, r_lse = ref.paged_prefill_varlen(q, k_cache, v_cache, tables, items, scale=scale, window=window,
                                            softcap=softcap, out=torch.full_like(q, 7.0), lse=torch.full((start, h), 7.0))
    torch.testing.assert_close(out, r_out, atol=ATOL, rtol=0)
    torch.testing.assert_close(lse, r_lse, atol=ATOL, rtol=0)
    pad = items[1][0] + items[1][1]
    assert (out[pad] == 7.0).all() and (lse[pad] == 7.0).all()
    for (s0, n, off), row in zip(items, tables, strict=True):  # each chunk as its own one-sequence launch
        if n:
            one, one_lse = ref.paged_prefill(q[s0 : s0 + n], k_cache, v_cache, row, q_offset=off, kv_len=off + n,
                                             scale=scale, window=window, softcap=softcap)
            torch.testing.assert_close(out[s0 : s0 + n], one, atol=ATOL, rtol=0)


def test_chunked_prefill_equals_one_shot():
    from longdoc_kernels.paged_attention import paged_prefill

    gen = torch.Generator().manual_seed(7)
    h, kvh, d, bs, n = 4, 2, 64, 4, 26
    k_cache, v_cache = make_cache(8, bs, kvh, d, gen)
    table = table_for(n, bs, 8, gen)
    q = torch.randn(n, h, d, generator=gen)
    full, full_lse = paged_prefill(q, k_cache, v_cache, table, q_offset=0, kv_len=n, scale=0.125)
    parts = [paged_prefill(q[s:e], k_cache, v_cache, table, q_offset=s, kv_len=e, scale=0.125) for s, e in ((0, 5), (5, 18), (18, 26))]
    torch.testing.assert_close(torch.cat([p[0] for p in parts]), full, atol=ATOL, rtol=0)
    torch.testing.assert_close(torch.cat([p[1] for p in parts]), full_lse, atol=ATOL, rtol=0)


@pytest.mark.parametrize("window, layout, splits", [(None, "tiered", 1), (None, "alternate", 1), (12, "tiered", 1),
                                                    (None, "tiered", 3), (None, "hot", 1)])
def test_prefill_reads_int8_warm_blocks_directly(window, layout, splits):
    """A chunk after a prefix whose blocks are partly INT8 warm pages (sinks and the recent blocks
    hot, as the cache places them; or every other block warm; or none): the kernel reading the
    pages directly matches the reference over the dequantised values, with key splits too."""
    from longdoc_kernels.kv_quant import quantize_blocks
    from longdoc_kernels.paged_attention import paged_prefill

    gen = torch.Generator().manual_seed(5 + splits + (window or 0))
    h, kvh, d, bs, tq, q_offset = 4, 2, 64, 4, 18, 30
    kv_len = q_offset + tq
    k_cache, v_cache = make_cache(24, bs, kvh, d, gen)
    table = table_for(kv_len, bs, 24, gen, freed_before=max(0, q_offset - window) if window else 0)
    kq, ks = quantize_blocks(k_cache)
    vq, vs = quantize_blocks(v_cache)
    nb = (kv_len + bs - 1) // bs
    first_chunk_block = q_offset // bs  # the chunk's own blocks were just written: hot
    for j in range(nb):
        e = int(table[j])
        warm = {"tiered": 0 < j < first_chunk_block - 2, "alternate": j % 2 == 1 and j < first_chunk_block,
                "hot": False}[layout]
        if e >= 0 and warm:
            table[j] = -e - 2
    assert (layout == "hot") == bool((table >= 0).all() or not (table <= -2).any())
    q = torch.randn(tq, h, d, generator=gen)
    kw = dict(q_offset=q_offset, kv_len=kv_len, scale=1 / math.sqrt(d), window=window,
              k_cache_int8=kq, v_cache_int8=vq, k_scale=ks, v_scale=vs)
    out, lse = paged_prefill(q, k_cache, v_cache, table, n_splits=splits, **kw)
    r_out, r_lse = ref.paged_prefill(q, k_cache, v_cache, table, **kw)
    torch.testing.assert_close(out, r_out, atol=ATOL, rtol=0)
    torch.testing.assert_close(lse, r_lse, atol=ATOL, rtol=0)


@pytest.mark.parametrize("window, int8, splits", [(None, False, 1), (None, False, 3), (9, False, 2), (None, True, 2),
                                                  (10, True, 4), (None, "tiered", 3), (None, "tiered", 1)])
def test_decode_matches_reference(window, int8, splits):
    from longdoc_kernels.kv_quant import quantize_blocks
    from longdoc_kernels.paged_attention import paged_decode

    gen = torch.Generator().manual_seed(11 + splits + (window or 0))
    h, kvh, d, bs = 4, 2, 64, 4
    lens = torch.tensor([1, 7, 19, 30], dtype=torch.int32)
    k_cache, v_cache = make_cache(40, bs, kvh, d, gen)
    max_blocks = 8
    tables = torch.full((4, max_blocks), -1, dtype=torch.int32)
    perm = torch.randperm(40, generator=gen)
    used = 0
    for b, n in enumerate(lens.tolist()):
        nb = (n + bs - 1) // bs
        tables[b, :nb] = perm[used : used + nb]
        used += nb
        if window is not None:  # blocks wholly outside the window are freed
            for j in range(nb):
                if (j + 1) * bs <= n - window:
                    tables[b, j] = -1
    kq = vq = ks = vs = None
    if int8:
        # "tiered": as the cache places them, the first block (sinks) and the last two (recent
        # window) hot, the rest warm, so some context splits hold one kind of block only and
        # mode 4 takes its hot-only and warm-only loops; else every other block is warm
        kq, ks = quantize_blocks(k_cache)
        vq, vs = quantize_blocks(v_cache)
        for b, n in enumerate(lens.tolist()):
            nb = (n + bs - 1) // bs
            for j in range(max_blocks):
                e = int(tables[b, j])
                to_warm = (0 < j < nb - 2) if int8 == "tiered" else j % 2 == 0
                if e >= 0 and to_warm:
                    tables[b, j] = -e - 2
    q = torch.randn(4, h, d, generator=gen)
    kw = dict(scale=0.125, window=window, k_cache_int8=kq, v_cache_int8=vq, k_scale=ks, v_scale=vs)
    r_out, r_lse = ref.paged_decode(q, k_cache, v_cache, tables, lens, **kw)
    # INT8 pages: every loop mode (2 per-tile branches, 3 branch-free masked loads, 4 the warm
    # span's loop then the hot span's; with the alternating layout both spans cover the range),
    # mode 4 with a warm tile larger than the hot one, and for mode 4's warm loop each way of
    # feeding int8 to the dots (0 cast; 1 the float16 bit trick, exact, but q and p round to
    # float16 (~5e-4 relative) where the interpreter's other paths stay float32; 2 int8 dot with q
    # quantised to int8: looser still)
    variants = [(2, 0, None), (3, 0, None), (4, 0, None), (4, 0, 32), (4, 1, None), (4, 2, None)] if int8 else [
        (4, 0, None)]
    for mode, conv, bnw in variants:
        out, lse = paged_decode(q, k_cache, v_cache, tables, lens, num_splits=splits, int8_mode=mode, int8_conv=conv,
                                block_n_warm=bnw, **kw)
        tol = (ATOL, 2e-3, 3e-2)[conv]
        torch.testing.assert_close(out, r_out, atol=tol, rtol=0)
        torch.testing.assert_close(lse, r_lse, atol=tol, rtol=0)


def test_int8_roundtrip_within_bound():
    from longdoc_kernels.kv_quant import dequantize_blocks, quantize_blocks

    gen = torch.Generator().manual_seed(3)
    x = torch.randn(5, 8, 2, 64, generator=gen) * torch.tensor([0.01, 30.0])[None, None, :, None]
    x[4] = 0.0
    q, s = quantize_blocks(x)
    rq, rs = ref.quantize_blocks(x)
    torch.testing.assert_close(s, rs)
    assert (q.int() - rq.int()).abs().max() <= 1  # rounding ties may differ by one step
    back = dequantize_blocks(q, s)
    err = (back - x).abs()
    bound = s[:, None, :, None] / 2 + 1e-7
    assert (err <= bound).all()
    assert back[4].abs().max() == 0


def test_rope_and_cache_write():
    from longdoc_kernels.rope_kv import rope_and_cache_write

    gen = torch.Generator().manual_seed(5)
    t, h, kvh, d, bs = 6, 4, 2, 64, 4
    q = torch.randn(t, h, d, generator=gen)
    k = torch.randn(t, kvh, d, generator=gen)
    v = torch.randn(t, kvh, d, generator=gen)
    ang = torch.rand(t, d // 2, generator=gen) * 6
    cos, sin = ang.cos(), ang.sin()
    slots = torch.tensor([3, 9, 10, 11, 17, 0])
    kc1, vc1 = torch.zeros(6, bs, kvh, d), torch.zeros(6, bs, kvh, d)
    kc2, vc2 = kc1.clone(), vc1.clone()
    qo = rope_and_cache_write(q, k, v, cos, sin, kc1, vc1, slots)
    rq = ref.rope_and_cache_write(q, k, v, cos, sin, kc2, vc2, slots)
    torch.testing.assert_close(qo, rq, atol=1e-5, rtol=0)
    torch.testing.assert_close(kc1, kc2, atol=1e-5, rtol=0)
    torch.testing.assert_close(vc1, vc2)
    assert kc1.abs().sum() > 0
    # a prefill also gets the rotated keys back (what its attention over fresh keys reads)
    kc3, vc3 = torch.zeros_like(kc1), torch.zeros_like(vc1)
    qo2, ko = rope_and_cache_write(q, k, v, cos, sin, kc3, vc3, slots, return_k=True)
    rq2, rk = ref.rope_and_cache_write(q, k, v, cos, sin, kc2, vc2, slots, return_k=True)
    torch.testing.assert_close(qo2, rq2, atol=1e-5, rtol=0)
    torch.testing.assert_close(ko, rk, atol=1e-5, rtol=0)
    torch.testing.assert_close(ko, kc3[slots // bs, slots % bs])  # the keys it wrote
    assert not torch.allclose(ko, k, atol=1e-2)  # rotated, not the input


def test_dispatch_uses_reference_without_triton(monkeypatch):
    from longdoc_kernels import dispatch

    monkeypatch.setenv("LONGDOC_DISABLE_TRITON", "1")
    assert not dispatch.use_triton(torch.device("cpu"))
    gen = torch.Generator().manual_seed(1)
    k_cache, v_cache = make_cache(4, 4, 1, 64, gen)
    table = torch.tensor([2, 0, 3], dtype=torch.int32)
    q = torch.randn(10, 2, 64, generator=gen)
    out, lse = dispatch.paged_prefill(q, k_cache, v_cache, table, q_offset=0, kv_len=10, scale=0.125)
    r_out, _ = ref.paged_prefill(q, k_cache, v_cache, table, q_offset=0, kv_len=10, scale=0.125)
    torch.testing.assert_close(out, r_out)
    monkeypatch.setenv("LONGDOC_DISABLE_TRITON", "0")
    assert dispatch.use_triton(torch.device("cpu"))  # the interpreter is on in these tests


@pytest.mark.parametrize("gemma", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_rms_norm_matches_reference(gemma, dtype):
    from longdoc_kernels.rmsnorm import rms_norm

    gen = torch.Generator().manual_seed(4)
    w = torch.randn(40, generator=gen) * 0.3
    weight = (1.0 + w) if gemma else w.to(dtype)
    x2 = (torch.randn(5, 40, generator=gen) * 3).to(dtype)
    fused = torch.randn(5, 3 * 2 * 40, generator=gen).to(dtype)
    x3 = fused[:, : 2 * 40].reshape(5, 2, 40)  # a strided view, as q out of a fused q/k/v matmul
    for x in (x2, x3):
        got = rms_norm(x, weight, 1e-6, gemma)
        want = ref.rms_norm(x, weight, 1e-6, gemma)
        assert got.dtype == x.dtype and got.shape == x.shape
        tol = 1e-5 if dtype == torch.float32 else 1e-2  # bf16: at most one rounding step apart
        torch.testing.assert_close(got.float(), want.float(), atol=tol, rtol=tol)


def test_i8_to_f16_is_exact_for_every_int8():
    from longdoc_kernels import paged_attention as pa

    x = torch.arange(-128, 128, dtype=torch.int8)
    y = torch.empty(256, dtype=torch.float16)
    pa._i8_to_f16_probe[(1,)](x, y, N=256)
    assert torch.equal(y, x.to(torch.float16))


@pytest.mark.parametrize("post, nxt, gemma", [(False, True, False), (True, True, True), (True, False, True)])
def test_add_rms_norm_matches_reference(post, nxt, gemma):
    """Residual add with the norm of the branch (Gemma's post-norm) and of the sum, one launch."""
    from longdoc_kernels.fused import add_rms_norm

    gen = torch.Generator().manual_seed(7)
    x, h = torch.randn(5, 80, generator=gen), torch.randn(5, 80, generator=gen) * 3
    wp = torch.rand(80, generator=gen) + 0.5 if post else None
    wn = torch.rand(80, generator=gen) + 0.5 if nxt else None
    xs, y = add_rms_norm(x, h, wp, wn, 1e-6, gemma)
    rxs, ry = ref.add_rms_norm(x, h, wp, wn, 1e-6, gemma)
    torch.testing.assert_close(xs, rxs, atol=1e-5, rtol=1e-5)
    if nxt:
        torch.testing.assert_close(y, ry, atol=1e-5, rtol=1e-5)
    else:
        assert y is None


@pytest.mark.parametrize("gelu", [False, True])
def test_act_mul_matches_reference(gelu):
    from longdoc_kernels.fused import act_mul

    gen = torch.Generator().manual_seed(8)
    gu = torch.randn(3, 2 * 1500, generator=gen) * 3  # F = 1500: two column tiles, a ragged one
    torch.testing.assert_close(act_mul(gu, gelu), ref.act_mul(gu, gelu), atol=1e-5, rtol=1e-5)


def test_rope_and_cache_write_full_width_cos():
    """The engine's cos/sin are [T, D] with equal halves; the kernel reads the first half (a view)."""
    from longdoc_kernels.rope_kv import rope_and_cache_write

    gen = torch.Generator().manual_seed(6)
    t, h, kvh, d, bs = 3, 4, 1, 32, 4
    q, k, v = torch.randn(t, h, d, generator=gen), torch.randn(t, kvh, d, generator=gen), torch.randn(t, kvh, d, generator=gen)
    ang = torch.rand(t, d // 2, generator=gen) * 6
    cos, sin = torch.cat([ang.cos()] * 2, -1), torch.cat([ang.sin()] * 2, -1)
    slots = torch.tensor([5, 6, 1], dtype=torch.int32)
    kc1, vc1 = torch.zeros(3, bs, kvh, d), torch.zeros(3, bs, kvh, d)
    kc2, vc2 = kc1.clone(), vc1.clone()
    qo = rope_and_cache_write(q, k, v, cos[:, : d // 2], sin[:, : d // 2], kc1, vc1, slots)
    rq = ref.rope_and_cache_write(q, k, v, ang.cos(), ang.sin(), kc2, vc2, slots.long())
    torch.testing.assert_close(qo, rq, atol=1e-5, rtol=0)
    torch.testing.assert_close(kc1, kc2, atol=1e-5, rtol=0)
    torch.testing.assert_close(vc1, vc2)


def test_tuning_tables_cover_the_bound_in_the_pools():
    """The decode tuner times on its own tables (the CUDA-graph warm-up's are one token of
    scratch): every row at the launch's length bound, ids inside the pools, INT8 laid out as the
    cache lays it (first block and last 32 hot)."""
    from longdoc_kernels.paged_attention import _tuning_tables

    tables, lens = _tuning_tables(3, 1000, 16, n_hot=50, n_warm=20, device="cpu")
    assert tables.shape == (3, 63) and lens.tolist() == [1000] * 3
    hot = tables >= 0
    assert hot[:, 0].all() and hot[:, -32:].all() and not hot[:, 1:-32].any()
    assert int(tables[hot].max()) < 50 and int((-tables[~hot] - 2).max()) < 20 and int((-tables[~hot] - 2).min()) >= 0
    only_hot, _ = _tuning_tables(2, 100, 16, n_hot=5, n_warm=None, device="cpu")
    assert (only_hot >= 0).all() and int(only_hot.max()) < 5


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_gather_blocks_tiered_matches_reference(dtype):
    """One launch gathers hot entries, dequantises warm ones (<= -2) and reads -1 as hot block 0,
    as the torch form does; head_dim 80 (not a power of two), block size 4, two kv heads."""
    from longdoc_kernels.kv_quant import gather_blocks_tiered

    gen = torch.Generator().manual_seed(11)
    kvh, d, bs, nblocks, nw = 2, 80, 4, 9, 6
    k_cache = torch.randn(nblocks, bs, kvh, d, generator=gen).to(dtype)
    v_cache = torch.randn(nblocks, bs, kvh, d, generator=gen).to(dtype)
    kq = torch.randint(-127, 128, (nw, bs, kvh, d), generator=gen, dtype=torch.int8)
    vq = torch.randint(-127, 128, (nw, bs, kvh, d), generator=gen, dtype=torch.int8)
    ks, vs = torch.rand(nw, kvh, generator=gen) / 50, torch.rand(nw, kvh, generator=gen) / 50
    for blocks in ([3, -2, 8, -7, -1, 0, -4], [-3, -2], [8, 1, 4], []):
        t = torch.tensor(blocks, dtype=torch.int32)
        k1, v1 = gather_blocks_tiered(k_cache, v_cache, t, kq, vq, ks, vs)
        k2, v2 = ref.gather_blocks_tiered(k_cache, v_cache, t, kq, vq, ks, vs)
        assert k1.dtype == dtype and k1.shape == (len(blocks), bs, kvh, d)
        # bfloat16: the interpreter's float32 -> bfloat16 rounding may differ from torch's by an ulp
        tol = {} if dtype == torch.float32 else {"rtol": 2**-7, "atol": 0.0}
        torch.testing.assert_close(k1, k2, **({"rtol": 0, "atol": 0} | tol), msg=str(blocks))
        torch.testing.assert_close(v1, v2, **({"rtol": 0, "atol": 0} | tol), msg=str(blocks))
        for j, e in enumerate(blocks):
            if e >= -1:  # hot (and -1, read as block 0): copied bit for bit
                assert torch.equal(k1[j], k_cache[max(e, 0)]) and torch.equal(v1[j], v_cache[max(e, 0)])
        if -7 in blocks:  # warm block 5's values, scaled
            j = blocks.index(-7)
            torch.testing.assert_close(k1[j], (kq[5].float() * ks[5][None, :, None]).to(dtype),
                                       **({"rtol": 0, "atol": 0} | tol))
