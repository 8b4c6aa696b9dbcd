"""gather_blocks on the CPU: a run of consecutive hot blocks comes back as views of the pools (no
copy), anything else as copies; the attention computed over either is the same, bit for bit."""

from __future__ import annotations

import torch

from engine.attention.backend import TorchAttentionBackend, gather_blocks


def _pools(n=12, bs=4, kvh=2, d=8):
    g = torch.Generator().manual_seed(0)
    return torch.randn(n, bs, kvh, d, generator=g), torch.randn(n, bs, kvh, d, generator=g)


def test_consecutive_blocks_are_views_others_copies():
    k, v = _pools()
    kb, vb = gather_blocks(k, v, torch.tensor([3, 4, 5]), None)
    assert kb.data_ptr() == k[3].data_ptr() and vb.data_ptr() == v[3].data_ptr()
    assert torch.equal(kb, k.index_select(0, torch.tensor([3, 4, 5])))
    for table in ([3, 5, 4], [5, 4], [10, 11, 0], [0, 2, 1]):
        t = torch.tensor(table)
        kc, vc = gather_blocks(k, v, t, None)
        assert kc.untyped_storage().data_ptr() != k.untyped_storage().data_ptr()
        assert torch.equal(kc, k.index_select(0, t))
        assert torch.equal(vc, v.index_select(0, t))
    kc, _ = gather_blocks(k, v, torch.tensor([10, 11]), None)  # the pool's last blocks
    assert kc.data_ptr() == k[10].data_ptr() and torch.equal(kc, k[10:12])

def test_decode_over_views_equals_decode_over_copies():
    k, v = _pools()
    be = TorchAttentionBackend()
    q = torch.randn(1, 4, 8, generator=torch.Generator().manual_seed(1))
    run = torch.tensor([[2, 3, 4, 5]])  # consecutive: views
    scattered = torch.tensor([[7, 0, 9, 1]])
    # the same keys at the scattered blocks: copy blocks 2..5 there
    k2, v2 = k.clone(), v.clone()
    for src, dst in zip(run[0].tolist(), scattered[0].tolist(), strict=True):
        k2[dst], v2[dst] = k[src], v[src]
    for n in (13, 16):
        a = be.decode(q, k, v, run, torch.tensor([n]), scale=0.3).out
        b = be.decode(q, k2, v2, scattered, torch.tensor([n]), scale=0.3).out
        assert torch.equal(a, b)

    # a prefill chunk of a few rows (the row-by-row path) and a longer one
    for tq in (3, 9):
        qq = torch.randn(tq, 4, 8, generator=torch.Generator().manual_seed(tq))
        a = be.prefill(qq, k, v, run[0], q_offset=16 - tq, kv_len=16, scale=0.3).out
        b = be.prefill(qq, k2, v2, scattered[0], q_offset=16 - tq, kv_len=16, scale=0.3).out
        assert torch.equal(a, b)
