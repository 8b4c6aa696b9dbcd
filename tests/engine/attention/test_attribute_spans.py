"""attribute_spans against a brute-force reference: a span takes every token of non-zero width that
overlaps it, its mass is their summed attention averaged over the answer's tokens. Random offsets
with zero-width tokens anywhere (special tokens), rising offsets (the binary-search path) and
offsets out of order (the mask path)."""

from __future__ import annotations

import random

import pytest
import torch

from engine.attention.attribution import attribute_spans


def brute(token_mass, offsets, spans):
    out = []
    for a, b in spans:
        toks = [i for i, (s, e) in enumerate(offsets) if e > s and s < b and e > a]
        col = token_mass[:, toks].sum(1) if toks else torch.zeros(token_mass.shape[0])
        out.append(((toks[0], toks[-1] + 1) if toks else (0, 0), float(col.mean())))
    return out


def random_case(rng: random.Random, rising: bool):
    n, pos, offsets = rng.randrange(1, 200), 0, []
    for _ in range(n):
        if rng.random() < 0.08:
            offsets.append((0, 0))  # a special token
            continue
        w = rng.randrange(0, 4)
        offsets.append((pos, pos + w))
        pos += w + rng.randrange(0, 2)
    if not rising:  # tokens out of order: a tokenizer that merges pieces back to front
        k = rng.randrange(len(offsets))
        offsets[k] = (pos + 1, pos + 3)
        pos += 3
    spans = [(a, a + rng.randrange(0, 12)) for a in (rng.randrange(0, pos + 3) for _ in range(rng.randrange(0, 15)))]
    return offsets, spans


@pytest.mark.parametrize("rising", [True, False])
def test_spans_take_the_overlapping_tokens(rising):
    rng = random.Random(7 if rising else 8)
    for _ in range(150):
        offsets, spans = random_case(rng, rising)
        mass = torch.rand(rng.randrange(1, 5), len(offsets))
        out = attribute_spans(mass, offsets, spans, list(range(mass.shape[0])), [0])
        ref = brute(mass, offsets, spans)
        assert [(s.token_start, s.token_end) for s in out.spans] == [r[0] for r in ref]
        assert [s.mass for s in out.spans] == pytest.approx([r[1] for r in ref], abs=1e-5)
        total = sum(r[1] for r in ref)
        if total > 0:
            assert sum(s.share for s in out.spans) == pytest.approx(1.0, abs=1e-6)
        assert out.per_token.shape == (mass.shape[0], len(spans))
