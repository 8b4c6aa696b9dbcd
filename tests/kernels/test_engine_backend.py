"""The Triton backend plugged into the engine's attention interface gives the same results as the
torch reference backend (CPU: through Triton's interpreter, small shapes)."""

from __future__ import annotations

import torch

from engine.attention import TorchAttentionBackend
from engine.attention_triton import TritonAttentionBackend


def test_backend_matches_torch_reference():
    gen = torch.Generator().manual_seed(0)
    h, kvh, d, bs = 4, 2, 64, 4
    k_cache = torch.randn(12, bs, kvh, d, generator=gen)
    v_cache = torch.randn(12, bs, kvh, d, generator=gen)
    table = torch.tensor([5, 1, 7, 3, 9], dtype=torch.int32)
    q = torch.randn(6, h, d, generator=gen)
    tri, ref = TritonAttentionBackend(), TorchAttentionBackend()
    for window in (None, 7):
        a = tri.prefill(q, k_cache, v_cache, table, q_offset=12, kv_len=18, scale=0.125, window=window, return_lse=True)
        b = ref.prefill(q, k_cache, v_cache, table, q_offset=12, kv_len=18, scale=0.125, window=window, return_lse=True)
        torch.testing.assert_close(a.out, b.out, atol=2e-4, rtol=0)
        torch.testing.assert_close(a.lse, b.lse, atol=2e-4, rtol=0)
    tables = torch.tensor([[5, 1, 7, 3, 9], [2, 4, -1, -1, -1]], dtype=torch.int32)
    lens = torch.tensor([19, 6])
    qd = torch.randn(2, h, d, generator=gen)
    a = tri.decode(qd, k_cache, v_cache, tables, lens, scale=0.125, return_lse=True)
    b = ref.decode(qd, k_cache, v_cache, tables, lens, scale=0.125, return_lse=True)
    torch.testing.assert_close(a.out, b.out, atol=2e-4, rtol=0)
    torch.testing.assert_close(a.lse, b.lse, atol=2e-4, rtol=0)
