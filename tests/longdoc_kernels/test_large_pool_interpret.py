"""The paged kernels address blocks past 2**31 elements of a pool, on the CPU through the
Triton interpreter.

The pools here are real tensors of more than 2**31 elements (8.6 GB of float32 for K and V
together, 2.1 GB of int8 for the warm pool), made with `torch.empty`: the operating system backs
only the pages that are written, so the test touches a few blocks at the very end of the pool and
block 0, and costs a few MB of memory. The interpreter does the kernels' offset arithmetic in
numpy with the kernels' own integer types, so a block id times the block stride computed in 32
bits wraps here as it does on a GPU (it reads the wrong address or faults); these tests pass only
when every block-id x stride product is 64-bit. K and V are two halves of one storage (the
kernels need only equal strides), so one allocation serves both.
"""

from __future__ import annotations

import pytest
import torch

from longdoc_kernels import reference as ref

pytestmark = pytest.mark.skipif(torch.cuda.is_available(), reason="interpreter tests run on the CPU")
ATOL = 2e-4
BS, KVH, D, H = 4, 2, 64, 4
N_BLOCKS = (1 << 31) // (BS * KVH * 2 * D) + 8  # K and V views of [N, BS, KVH, 2D]: > 2**31 elements each view spans


def big_pool(dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    kv = torch.empty(N_BLOCKS, BS, KVH, 2 * D, dtype=dtype)
    k, v = kv[..., :D], kv[..., D:]
    assert k.stride(0) * (N_BLOCKS - 1) > 2**31  # the last blocks lie past 2**31 elements
    return k, v


def last_blocks(n: int) -> list[int]:
    """Block 0 and the pool's last blocks: the ids a table of `n` blocks points at."""
    return [0] + list(range(N_BLOCKS - n + 1, N_BLOCKS))


def fill(k: torch.Tensor, v: torch.Tensor, ids: list[int], gen: torch.Generator) -> None:
    for b in ids:
        k[b] = torch.randn(BS, KVH, D, generator=gen)
        v[b] = torch.randn(BS, KVH, D, generator=gen)


def test_prefill_reads_the_last_blocks_of_a_large_pool():
    from longdoc_kernels.paged_attention import paged_prefill

    gen = torch.Generator().manual_seed(0)
    k, v = big_pool(torch.float32)
    n = 6 * BS - 1
    ids = last_blocks(6)
    fill(k, v, ids, gen)
    table = torch.tensor(ids, dtype=torch.int32)
    q = torch.randn(n, H, D, generator=gen)
    out, lse = paged_prefill(q, k, v, table, q_offset=0, kv_len=n, scale=D**-0.5)
    r_out, r_lse = ref.paged_prefill(q, k, v, table, q_offset=0, kv_len=n, scale=D**-0.5)
    torch.testing.assert_close(out, r_out, atol=ATOL, rtol=0)
    torch.testing.assert_close(lse, r_lse, atol=ATOL, rtol=0)


def test_varlen_prefill_reads_the_last_blocks_of_a_large_pool():
    """The several-chunk prefill launch addresses the pool's last blocks (two chunks after cached
    prefixes over them, with different tables)."""
    from longdoc_kernels.paged_attention import paged_prefill_varlen

    gen = torch.Generator().manual_seed(2)
    k, v = big_pool(torch.float32)
    ids = last_blocks(6)
    fill(k, v, ids, gen)
    tables = torch.tensor([ids, ids[::-1]], dtype=torch.int32)
    items = [(0, 3, 6 * BS - 3), (3, 5, 4 * BS)]
    q = torch.randn(8, H, D, generator=gen)
    out, lse = paged_prefill_varlen(q, k, v, tables, items, scale=D**-0.5)
    r_out, r_lse = ref.paged_prefill_varlen(q, k, v, tables, items, scale=D**-0.5)
    torch.testing.assert_close(out, r_out, atol=ATOL, rtol=0)
    torch.testing.assert_close(lse, r_lse, atol=ATOL, rtol=0)


@pytest.mark.parametrize("int8", [False, True])
def test_decode_reads_the_last_blocks_of_a_large_pool(int8):
    from longdoc_kernels.paged_attention import paged_decode

    gen = torch.Generator().manual_seed(1)
    k, v = big_pool(torch.float32)
    ids = last_blocks(5)
    fill(k, v, ids, gen)
    lens = torch.tensor([5 * BS, 3 * BS - 2], dtype=torch.int32)
    tables = torch.tensor([ids, ids[::-1]], dtype=torch.int32)
    kw = {}
    if int8:  # the warm pool is as large; the middle blocks of each table are warm
        kq, vq = big_pool(torch.int8)
        ks = torch.empty(N_BLOCKS, KVH)
        vs = torch.empty(N_BLOCKS, KVH)
        for b in ids:
            kq[b] = torch.randint(-127, 128, (BS, KVH, D), generator=gen, dtype=torch.int8)
            vq[b] = torch.randint(-127, 128, (BS, KVH, D), generator=gen, dtype=torch.int8)
            ks[b] = torch.rand(KVH, generator=gen) / 64
            vs[b] = torch.rand(KVH, generator=gen) / 64
        tables[:, 1:3] = -tables[:, 1:3] - 2
        kw = dict(k_cache_int8=kq, v_cache_int8=vq, k_scale=ks, v_scale=vs)
    q = torch.randn(2, H, D, generator=gen)
    r_out, r_lse = ref.paged_decode(q, k, v, tables, lens, scale=0.125, **kw)
    out, lse = paged_decode(q, k, v, tables, lens, scale=0.125, num_splits=2, **kw)
    torch.testing.assert_close(out, r_out, atol=ATOL, rtol=0)
    torch.testing.assert_close(lse, r_lse, atol=ATOL, rtol=0)


def test_rope_cache_write_lands_in_the_last_block_of_a_large_pool():
    from longdoc_kernels.rope_kv import rope_and_cache_write

    gen = torch.Generator().manual_seed(2)
    k_cache, v_cache = big_pool(torch.float32)
    last = N_BLOCKS - 1
    k_cache[last].zero_()
    v_cache[last].zero_()
    t = 3
    q = torch.randn(t, H, D, generator=gen)
    k = torch.randn(t, KVH, D, generator=gen)
    v = torch.randn(t, KVH, D, generator=gen)
    ang = torch.rand(t, D // 2, generator=gen) * 6
    slots = torch.tensor([last * BS, last * BS + 2, last * BS + 3])
    rope_and_cache_write(q, k, v, ang.cos(), ang.sin(), k_cache, v_cache, slots)
    rk, rv = torch.zeros(1, BS, KVH, D), torch.zeros(1, BS, KVH, D)
    ref.rope_and_cache_write(q, k, v, ang.cos(), ang.sin(), rk, rv, slots - last * BS)
    torch.testing.assert_close(k_cache[last], rk[0], atol=1e-5, rtol=0)
    torch.testing.assert_close(v_cache[last], rv[0])
