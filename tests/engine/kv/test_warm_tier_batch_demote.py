"""PagedKVCache.demote_all (a step's sequences, one copy per layer group) against `demote` called
per sequence: the same tables, warm pages and free lists, with and without shared blocks, a
demotion watermark and a warm pool too small for every candidate."""

import pytest
import torch

from tests.engine.kv.warm_helpers import fill, make_cache, model_config


def _seqs(kv, lens, shared):
    """Tables for sequences of `lens` tokens with random K/V; every sequence but the first starts
    with the first one's first `shared` blocks (a cached prefix), as the prefix cache shares them."""
    gen = torch.Generator().manual_seed(0)
    for g in kv.groups:  # the pools start as torch.empty: unused warm blocks would differ between caches
        if g.warm is not None:
            for t in (g.warm.kq, g.warm.vq, g.warm.ks, g.warm.vs, g.warm.kmin, g.warm.kmax):
                t.zero_()
    out = []
    for n in lens:
        tables = [[] for _ in kv.groups]
        if out and shared:
            for gi, g in enumerate(kv.groups):
                for b in out[0][0][gi][:shared]:
                    g.allocator.incref(b)
                    tables[gi].append(b)
            fill(kv, tables, shared * kv.block_size, n - shared * kv.block_size, gen)
        else:
            fill(kv, tables, 0, n, gen)
        out.append((tables, n))
    return out


def _state(kv, seqs):
    warm = [(w.kq.clone(), w.vq.clone(), w.ks.clone(), w.vs.clone(), w.kmin.clone(), w.kmax.clone())
            for w in (g.warm for g in kv.groups) if w is not None]
    free = [(g.allocator.num_free, g.warm.allocator.num_free if g.warm else None) for g in kv.groups]
    return [t for t, _ in seqs], warm, free


@pytest.mark.parametrize("shared, warm_blocks, watermark", [(0, 64, False), (3, 64, False), (3, 64, True), (0, 6, False)])
def test_demote_all_equals_demote_per_sequence(shared, warm_blocks, watermark):
    lens = [60, 17, 90, 13]
    cfg = model_config(windows=(None, None))
    a = make_cache(cfg, warm_blocks=warm_blocks, hot_window=8, sink_tokens=4)
    b = make_cache(cfg, warm_blocks=warm_blocks, hot_window=8, sink_tokens=4)
    seqs_a, seqs_b = _seqs(a, lens, shared), _seqs(b, lens, shared)
    if watermark:  # the hot pool 12 blocks over it: the oldest candidates move until that many are freed
        g = a.groups[0]
        a.demote_watermark = b.demote_watermark = (g.allocator.num_used - 12) / g.num_blocks
    moved = sum(a.demote(t, n) for t, n in seqs_a)
    assert b.demote_all(seqs_b) == moved > 0
    ta, wa, fa = _state(a, seqs_a)
    tb, wb, fb = _state(b, seqs_b)
    assert ta == tb and fa == fb
    assert any(e <= -2 for tables, _ in seqs_b for e in tables[0])
    for x, y in zip(wa, wb, strict=True):
        for p, q in zip(x, y, strict=True):
            assert torch.equal(p, q)


def test_demote_all_without_a_warm_pool_moves_nothing():
    kv = make_cache(warm_blocks=None)
    seqs = _seqs(kv, [40, 20], 0)
    before = [[list(t) for t in tables] for tables, _ in seqs]
    assert kv.demote_all(seqs) == 0
    assert [tables for tables, _ in seqs] == before
