"""On a GPU: a prefill chunk after a cached prefix through torch's flash attention over the
gathered prefix (the Triton backend's default) against the paged Triton kernel and the float32
torch reference, at the real shapes (Llama-3-8B: 32 heads over 8 KV heads, head_dim 128; Gemma 3
270M's global layers: 4 over 1, head_dim 256), bf16, blocks scattered over the pool, hot and warm."""

from __future__ import annotations

import pytest
import torch

pytestmark = pytest.mark.gpu
DEV = torch.device("cuda")


def rel(a, b):
    return float((a.float() - b.float()).norm() / b.float().norm())


@pytest.mark.parametrize("h,kvh,d", [(32, 8, 128), (4, 1, 256)])
def test_prefix_chunk_flash_matches_paged_kernel_and_reference(h, kvh, d):
    from engine.attention.backend import TorchAttentionBackend
    from engine.attention.triton_backend import TritonAttentionBackend
    from engine.kv.warm_tier import WarmPages

    gen = torch.Generator(device=DEV).manual_seed(0)
    bs, nblocks, q_offset, tq = 16, 1200, 6000, 1500  # the prefix ends mid-block
    kv_len = q_offset + tq
    nb = (kv_len + bs - 1) // bs
    k_cache = torch.randn(nblocks, bs, kvh, d, device=DEV, generator=gen, dtype=torch.bfloat16)
    v_cache = torch.randn(nblocks, bs, kvh, d, device=DEV, generator=gen, dtype=torch.bfloat16)
    table = torch.randperm(nblocks, device=DEV, generator=gen)[:nb].to(torch.int32)
    q = torch.randn(tq, h, d, device=DEV, generator=gen, dtype=torch.bfloat16)
    scale = d ** -0.5
    flash, paged = TritonAttentionBackend(prefix_sdpa=True), TritonAttentionBackend(prefix_sdpa=False)
    ref = TorchAttentionBackend()

    def ref32(tab, warm=None):
        return ref.prefill(q.float(), k_cache.float(), v_cache.float(), tab, q_offset=q_offset, kv_len=kv_len,
                           scale=scale, warm=warm).out

    a = flash.prefill(q, k_cache, v_cache, table, q_offset=q_offset, kv_len=kv_len, scale=scale).out
    b = paged.prefill(q, k_cache, v_cache, table, q_offset=q_offset, kv_len=kv_len, scale=scale).out
    want = ref32(table)
    err_flash, err_paged = rel(a, want), rel(b, want)
    print(f"h{h}/{kvh} d{d}: rel err vs fp32: flash over the gathered prefix {err_flash:.2e}, paged kernel {err_paged:.2e}")
    assert err_flash < 1e-2 and err_flash <= 1.5 * err_paged + 1e-3
    assert flash._sdpa_failed == set()  # the fused path ran, not a silent fallback
    if d <= flash.CUDNN_MAX_HEAD_DIM and flash.cudnn is not False:
        assert flash._cudnn_failed == set()  # cuDNN's kernel (two calls merged) took it

    # warm blocks among the visible ones: every third block of the prefix INT8
    nw = nb // 3
    kq = torch.randint(-127, 128, (nw, bs, kvh, d), device=DEV, generator=gen, dtype=torch.int8)
    vq = torch.randint(-127, 128, (nw, bs, kvh, d), device=DEV, generator=gen, dtype=torch.int8)
    ks = torch.rand(nw, kvh, device=DEV, generator=gen) / 100
    vs = torch.rand(nw, kvh, device=DEV, generator=gen) / 100
    warm = WarmPages(kq, vq, ks, vs, kq.amin(1), kq.amax(1))
    wtable = table.clone()
    wtable[0 : 3 * nw : 3] = -torch.arange(nw, device=DEV, dtype=torch.int32) - 2
    a = flash.prefill(q, k_cache, v_cache, wtable, q_offset=q_offset, kv_len=kv_len, scale=scale, warm=warm).out
    b = paged.prefill(q, k_cache, v_cache, wtable, q_offset=q_offset, kv_len=kv_len, scale=scale, warm=warm).out
    want = ref32(wtable, warm)
    err_flash, err_paged = rel(a, want), rel(b, want)
    print(f"h{h}/{kvh} d{d} warm: rel err vs fp32: flash {err_flash:.2e}, paged {err_paged:.2e}")
    assert err_flash < 1e-2 and err_flash <= 1.5 * err_paged + 1e-3


@pytest.mark.parametrize("h,kvh,d", [(32, 8, 128), (4, 1, 256)])
@pytest.mark.parametrize("tq,q_offset", [(2048, 0), (2048, 4096), (1999, 0), (1999, 4100), (300, 16)])
def test_cudnn_attention_matches_reference(h, kvh, d, tq, q_offset):
    """sdpa_cudnn alone: a prompt's first chunk (one causal call) and a chunk after a prefix (two
    calls merged by their log-sum-exps) against float32 attention and against flash."""
    from engine.attention.triton_backend import sdpa_causal, sdpa_cudnn

    gen = torch.Generator(device=DEV).manual_seed(1)
    tk = q_offset + tq
    q = torch.randn(tq, h, d, device=DEV, generator=gen, dtype=torch.bfloat16)
    k = torch.randn(tk, kvh, d, device=DEV, generator=gen, dtype=torch.bfloat16)
    v = torch.randn(tk, kvh, d, device=DEV, generator=gen, dtype=torch.bfloat16)
    want = sdpa_causal(q.float(), k.float(), v.float(), d ** -0.5)
    got = sdpa_cudnn(q, k, v, d ** -0.5)
    flash = sdpa_causal(q, k, v, d ** -0.5)
    err, err_flash = rel(got, want), rel(flash, want)
    print(f"cudnn h{h}/{kvh} d{d} rows {tq} offset {q_offset}: rel err {err:.2e} (flash {err_flash:.2e})")
    assert err < 1e-2 and err <= 1.5 * err_flash + 1e-3
