"""Quest-style sparse decode (engine/attention/sparse.py): the block bound is an upper bound of every query
head's scores, selection keeps exactly top-k warm blocks plus every hot block and the last one, and
one query head that matches a block gets it even when the other heads of its group do not."""

from __future__ import annotations

import torch

from engine.attention import sparse
from engine.kv.warm_tier import WarmPages, warm_entry
from tests.engine.kv.warm_helpers import fill, layer_kv, make_cache


def demoted(n: int = 60, seed: int = 0):
    kv = make_cache(sink_tokens=4, hot_window=8)  # block 4, heads 4 / kv heads 2, head_dim 16
    tables = kv.new_tables()
    fill(kv, tables, 0, n, torch.Generator().manual_seed(seed))
    kv.release_out_of_window(tables, n)
    kv.demote(tables, n)
    return kv, tables


def test_bound_is_an_upper_bound_of_every_heads_scores():
    kv, tables = demoted()
    n, bs = 60, kv.block_size
    warm = kv.layer_warm(0)
    k, _ = layer_kv(kv, 0, tables[0], n)  # dequantised keys [n, kvh, d]
    table = torch.tensor([tables[0]])
    gen = torch.Generator().manual_seed(1)
    for _ in range(5):
        q = torch.randn(1, 4, 16, generator=gen) * 3
        bound = sparse.block_scores(q, table, warm)[0]  # [W, kvh]
        qg = q[0].view(2, 2, 16)  # [kvh, group, d]
        warm_blocks = [b for b, e in enumerate(tables[0]) if e <= -2]
        assert len(warm_blocks) >= 8
        for b in warm_blocks:
            kb = k[b * bs : (b + 1) * bs]  # [bs, kvh, d]
            actual = torch.einsum("grd,tgd->tgr", qg, kb).amax(dim=(0, 2))  # best score per kv head
            assert torch.all(actual <= bound[b] + 1e-4), (b, actual, bound[b])
        hot = [b for b, e in enumerate(tables[0]) if e > -2]
        assert torch.all(torch.isinf(bound[hot]))


def test_select_keeps_top_k_warm_hot_and_last_block_in_order():
    kv, tables = demoted()
    n, bs, top_k = 59, kv.block_size, 3  # the last block is partial (3 of 4 tokens)
    warm = kv.layer_warm(0)
    table = torch.tensor([tables[0][: (n + bs - 1) // bs]])
    q = torch.randn(1, 4, 16, generator=torch.Generator().manual_seed(2))
    new_tables, new_lens = sparse.select_blocks(q, table, torch.tensor([n]), warm, top_k, bs)
    scores = sparse.block_scores(q, table, warm)[0].amax(dim=1)
    warm_cols = [b for b, e in enumerate(table[0].tolist()) if e <= -2]
    best = sorted(sorted(warm_cols, key=lambda b: -float(scores[b]))[:top_k])
    hot_cols = [b for b, e in enumerate(table[0].tolist()) if e >= 0]
    last = table.shape[1] - 1
    kept = sorted(set(best) | set(hot_cols) | {last})
    assert new_tables[0].tolist() == [table[0, b].item() for b in kept]
    assert int(new_lens[0]) == (len(kept) - 1) * bs + (n - last * bs)


def test_one_matching_head_gets_its_block():
    """Group of two query heads over one kv head: head 0 matches block 1 strongly, head 1 is
    strongly negative on it and mildly positive everywhere else. The block must be kept at top-1
    (summing the two heads' bounds would rank it last)."""
    nb, bs, d = 6, 4, 8
    kq = torch.zeros(nb, bs, 1, d, dtype=torch.int8)
    kq[:, :, 0, 1] = 10  # every block: dimension 1 moderately positive
    kq[1, :, 0, 0] = 100  # block 1: dimension 0 large
    ks = torch.ones(nb, 1)
    kmin = kq.amin(dim=1)
    kmax = kq.amax(dim=1)
    warm = WarmPages(kq, kq.clone(), ks, ks.clone(), kmin, kmax)
    q = torch.zeros(1, 2, d)
    q[0, 0, 0] = 1.0  # head 0 looks for dimension 0
    q[0, 1, 0] = -1.5  # head 1 is strongly against it
    q[0, 1, 1] = 1.0  # and mildly for dimension 1
    table = torch.tensor([[warm_entry(w) for w in range(nb)] + [0]])  # a hot last block
    lens = torch.tensor([(nb + 1) * bs])
    new_tables, _ = sparse.select_blocks(q, table, lens, warm, 1, bs)
    assert warm_entry(1) in new_tables[0].tolist()
    summed = (q[0].clamp(min=0).sum(0) @ kmax[:, 0].float().T) + (q[0].clamp(max=0).sum(0) @ kmin[:, 0].float().T)
    assert int(summed.argmax()) != 1  # the summed bound would have chosen another block
