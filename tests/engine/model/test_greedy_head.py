"""GreedyHead (engine/model/quant.py): the argmax of an int8 output layer found through a filter
(an int4 copy through torch's kernel or the C one, or the int8 layer through fbgemm with two-row
integer activations) equals the
argmax of the whole int8 product, the filters' bounds hold, the candidates' int8 logits equal the
whole product's bit for bit (what its exactness rests on), the filter is chosen as documented, and
a greedy request on the packaged model gives the same tokens with and without it."""

from __future__ import annotations

import pytest
import torch

from engine.model import quant
from engine.model.quant import GreedyHead, Int4Filter, Int8Filter, Int8Weight
from longdoc_kernels import cpu

C_INT4 = cpu.lib() is not None and cpu.int4_filter_fast()  # Int4Filter's kernel runs here
FILTERS = ["int4", "int8"] + (["int4c"] if C_INT4 else [])
pytestmark = pytest.mark.skipif(not hasattr(torch, "_weight_int4pack_mm_for_cpu"), reason="no CPU int4 kernel")


@pytest.mark.parametrize("filt", FILTERS)
def test_argmax_equals_the_int8_product_and_rows_compute_alike(filt):
    gen = torch.Generator().manual_seed(0)
    w = torch.randn(20000, 256, generator=gen) * 0.05
    w[123] += 0.02  # a few rows close to each other: near-ties the filter must keep
    w[124] = w[123] + 1e-4
    head = Int8Weight(w)
    greedy = GreedyHead(head, filter=filt)
    assert greedy.filter == filt
    x = torch.randn(16, 256, generator=gen) * 3
    x[3] = w[123] * 40  # a row whose best tokens nearly tie
    full = head.matmul(x).float()
    assert greedy.argmax(x) == full.argmax(-1).tolist()
    assert 0 < greedy.last_candidates < w.shape[0]  # it filtered, and kept something
    rows = torch.tensor([5, 123, 124, 19999, 7000])
    xb = x.to(torch.bfloat16)
    some = torch._weight_int8pack_mm(xb, head.q[rows].contiguous(), head.scale_bf16[rows].contiguous())
    assert torch.equal(some.float(), full[:, rows])
    for k in range(x.shape[0]):  # one row at a time, as a decode step of one sequence
        assert greedy.argmax(x[k:k + 1]) == [int(full[k].argmax())]


@pytest.mark.parametrize("filt", [f for f in FILTERS if f != "int8"])
def test_too_many_candidates_take_the_whole_product(monkeypatch, filt):
    """A flat distribution (every row a candidate): the whole int8 product, the same argmax."""
    gen = torch.Generator().manual_seed(1)
    w = torch.randn(4096, 256, generator=gen) * 0.05
    head = Int8Weight(w)
    greedy = GreedyHead(head, filter=filt)
    x = torch.randn(3, 256, generator=gen) * 1e-3  # logits all near 0: nothing is ruled out
    full = head.matmul(x).float().argmax(-1).tolist()
    calls = []
    real = torch._weight_int8pack_mm
    monkeypatch.setattr(torch, "_weight_int8pack_mm", lambda a, q, s: calls.append(q is head.q) or real(a, q, s))
    assert greedy.argmax(x) == full
    assert greedy.last_candidates * quant.FULL_HEAD_SHARE > w.shape[0] and calls[-1]  # the layer itself, no gather


@pytest.mark.model
def test_greedy_generation_is_unchanged_on_the_packaged_model():
    """Each filter on the real output layer (262,144 rows): the same tokens as the whole int8 product."""
    from engine import LLM, SamplingParams

    try:
        llm = LLM(device="cpu")  # the packaged GGUF, int8 weights: the GreedyHead is on
    except Exception as exc:  # noqa: BLE001 - the packaged model is a dependency; say why if absent
        pytest.skip(f"packaged model unavailable: {exc}")
    assert llm.model.greedy_head is not None
    prompts = ["The supplier shall deliver the goods within", "Article 1. Definitions. In this Agreement,"]
    params = SamplingParams(max_tokens=12, ignore_eos=True)
    default = llm.model.greedy_head
    try:
        llm.model.greedy_head = None
        slow = [o.token_ids for o in llm.generate(prompts, params)]
        for filt in FILTERS:
            llm.model.greedy_head = default if default.filter == filt else GreedyHead(llm.model.qhead, filter=filt)
            assert [o.token_ids for o in llm.generate(prompts, params)] == slow, filt
    finally:
        llm.model.greedy_head = default


def _exact(x: torch.Tensor, head: Int8Weight) -> torch.Tensor:
    """x.w_j in float64 with the weights _weight_int8pack_mm multiplies by (int8 rows x bfloat16 scales)."""
    return x.double() @ (head.q.double() * head.scale_bf16.double()[:, None]).T


def test_int8_filter_bound_holds_and_is_tight():
    """|x.w_j - approx_j| <= bound_j for every row, activations with outlier channels included
    (what the filter's exactness rests on), and the bound is far below the logits' spread."""
    gen = torch.Generator().manual_seed(2)
    w = torch.randn(6000, 640, generator=gen) * 0.05
    head = Int8Weight(w)
    filt = Int8Filter(head)
    x = torch.randn(4, 640, generator=gen)
    x[1, 7] = 300.0  # an outlier channel: the scale follows it
    x[2] *= 1e-4  # a tiny row
    x[3] = 0.0
    x[3, 5] = 2.5
    x = x.to(torch.bfloat16).float()  # the activations the int8 kernel reads
    approx, bound = filt.coarse(x)
    err = (approx.double() - _exact(x, head)).abs()
    assert bool((err <= bound.double()).all())
    assert float(bound[0].max()) < 1e-2 * float(_exact(x[:1], head).std())  # measured: 3.6e-3 of it


def test_int8_filter_prefers_few_candidates():
    """On random activations the int8 filter keeps far fewer rows than the int4 one (its bound is
    the activations' rounding, not the weights')."""
    gen = torch.Generator().manual_seed(3)
    w = torch.randn(20000, 256, generator=gen) * 0.05
    head = Int8Weight(w)
    x = torch.randn(1, 256, generator=gen) * 3
    counts = {}
    for filt in FILTERS:
        greedy = GreedyHead(head, filter=filt)
        assert greedy.argmax(x) == [int(head.matmul(x).float().argmax())]
        counts[filt] = greedy.last_candidates
    assert 1 <= counts["int8"] < counts["int4"]


def test_filter_choice(monkeypatch):
    """Without the C int4 kernel: AVX2: the int8 filter, the int4 copy not built; AVX-512: both
    timed, the faster kept; no fbgemm: int4; LONGDOC_GREEDY_FILTER names one; anything else is
    refused. With it (tested below), it stands in for torch's int4 kernel."""
    head = Int8Weight(torch.randn(512, 64, generator=torch.Generator().manual_seed(4)))
    monkeypatch.delenv("LONGDOC_GREEDY_FILTER", raising=False)
    monkeypatch.setattr(quant, "cpu_kernels", lambda: None)
    with pytest.raises(ValueError, match="int4c"):
        GreedyHead(head, filter="int4c")
    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: "AVX2")
    g = GreedyHead(head)
    assert (g.filter, g.int4) == ("int8", None)
    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: "AVX512")
    for fast in ("int4", "int8"):
        monkeypatch.setattr(GreedyHead, "_time", lambda self, fn, fast=fast: 0.0 if (fn == self._int4) == (fast == "int4")
                            else 1.0)
        g = GreedyHead(head)
        assert g.filter == fast and set(g.timings) == {"int4", "int8"}
        assert (g.int4 is None) == (fast == "int8") and (g.int8 is None) == (fast == "int4")
    monkeypatch.setenv("LONGDOC_GREEDY_FILTER", "int4")
    assert GreedyHead(head).filter == "int4"
    monkeypatch.setenv("LONGDOC_GREEDY_FILTER", "int2")
    with pytest.raises(ValueError, match="int2"):
        GreedyHead(head)
    monkeypatch.delenv("LONGDOC_GREEDY_FILTER")

    def no_fbgemm(self, head):
        raise RuntimeError("no fbgemm in this build")

    monkeypatch.setattr(quant.Int8Filter, "__init__", no_fbgemm)
    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: "AVX2")
    assert GreedyHead(head).filter == "int4"
    with pytest.raises(RuntimeError, match="fbgemm"):
        GreedyHead(head, filter="int8")


def test_c_candidates_are_the_torch_expressions_rows(monkeypatch):
    """With the C kernels (longdoc_kernels/cpu), the int4 filter's argmax and candidate rows are
    exactly those of the torch path, batch and single rows alike."""
    from longdoc_kernels import cpu

    if cpu.lib() is None:
        pytest.skip(f"C kernels not built here: {cpu.status()}")
    gen = torch.Generator().manual_seed(4)
    w = torch.randn(30000, 256, generator=gen) * 0.05
    w[77] = w[78] + 1e-4  # a near-tie
    head = Int8Weight(w)
    greedy = GreedyHead(head, filter="int4")
    x = torch.randn(6, 256, generator=gen) * 3
    x[2] = w[78] * 40
    calls = []
    real = cpu.int4_candidates
    monkeypatch.setattr(cpu, "int4_candidates", lambda *a: calls.append(1) or real(*a))
    got = {}
    for on in (True, False):
        monkeypatch.setattr(quant, "cpu_kernels", (lambda: cpu) if on else (lambda: None))
        got[on] = []
        for rows in (slice(0, 6), slice(2, 3), slice(4, 5)):
            got[on].append((greedy.argmax(x[rows]), greedy.last_candidates))
    assert got[True] == got[False] and len(calls) == 3
    assert got[True][0][0] == head.matmul(x).float().argmax(-1).tolist()
    xb = x.to(torch.bfloat16)
    coarse = torch._weight_int4pack_mm_for_cpu(xb, greedy.int4.packed, greedy.int4.group, greedy.int4.scale_zeros)
    assert torch.equal(cpu.bf16_argmax(coarse), coarse.float().argmax(-1))
    coarse[1, 999] = coarse[1].max()  # a tie: the first index, as torch.argmax
    assert torch.equal(cpu.bf16_argmax(coarse), coarse.float().argmax(-1))
    # the kernel on its own, a width that is not a multiple of its vectors (the scalar tail)
    c = (torch.randn(3, 1003, generator=gen) * 4).to(torch.bfloat16)
    c[1, 1000] = c[1].max()  # a row of the tail among the candidates
    err, xn = torch.rand(1003, generator=gen) * 0.01, torch.rand(3, generator=gen) * 50
    fl = c.float().amax(1) - 0.5
    ceiling = c.float() + (c.float().abs() * quant._BF16_REL + xn[:, None] * err * (1 + quant._BF16_REL)) + quant._SLACK
    want = torch.nonzero((ceiling >= (fl - fl.abs() * quant._BF16_REL - quant._SLACK)[:, None]).any(0)).flatten()
    assert 0 < want.numel() < 1003 and (want >= 992).any()
    assert torch.equal(cpu.int4_candidates(c, err, xn, fl, quant._BF16_REL, quant._SLACK), want)
    assert torch.equal(cpu.bf16_argmax(c), c.float().argmax(-1))


@pytest.mark.skipif(not C_INT4, reason="no C int4 filter here (C kernels with AVX-512)")
def test_c_int4_filter_is_chosen_and_timed(monkeypatch):
    """Where the C int4 kernel runs it is the int4 filter (torch's int4 copy not built), timed
    against the int8 filter as torch's was; LONGDOC_GREEDY_FILTER=int4 still gives torch's; with
    the kernels switched off after the build the whole int8 product gives the argmax."""
    head = Int8Weight(torch.randn(512, 64, generator=torch.Generator().manual_seed(4)))
    monkeypatch.delenv("LONGDOC_GREEDY_FILTER", raising=False)
    for fast in ("int4c", "int8"):
        monkeypatch.setattr(GreedyHead, "_time", lambda self, fn, fast=fast: 0.0 if (fn == self._int4c_pass) ==
                            (fast == "int4c") else 1.0)
        g = GreedyHead(head)
        assert g.filter == fast and set(g.timings) == {"int4c", "int8"} and g.int4 is None
    monkeypatch.setenv("LONGDOC_GREEDY_FILTER", "int4")
    assert GreedyHead(head).filter == "int4"
    g = GreedyHead(head, filter="int4c")
    x = torch.randn(3, 64, generator=torch.Generator().manual_seed(5)) * 3
    want = head.matmul(x).float().argmax(-1).tolist()
    assert g.argmax(x) == want
    monkeypatch.setattr(quant, "cpu_kernels", lambda: None)  # switched off after the build: the whole product
    assert g.argmax(x) == want


@pytest.mark.skipif(not C_INT4, reason="no C int4 filter here (C kernels with AVX-512)")
def test_c_int4_filter_bound_holds():
    """Int4Filter's logits against the int8 layer's in float64: within the bound (weights' gap,
    activations' int16 rounding, float32 accumulation) for every row, with outlier channels, a
    tiny row, a row count off the 16-row blocks; the bound no looser than that of torch's int4
    copy (Cauchy-Schwarz is loose on random rows: ~the logits' spread; real output layers are
    peaked); its argmax is the first largest coarse logit."""
    gen = torch.Generator().manual_seed(12)
    w = torch.randn(5003, 320, generator=gen) * 0.05
    w[17] *= 40  # a row of large weights: its scale follows it
    head = Int8Weight(w)
    f = Int4Filter(head, chunk=1024)
    x = torch.randn(5, 320, generator=gen)
    x[1, 7] = 300.0
    x[2] *= 1e-4
    x[3] = 0.0
    x[3, 5] = 2.5
    x = x.to(torch.bfloat16).float()
    coarse, best, stats = cpu.int4_filter(f.packed, 5003, x)
    gap = (coarse.double() - _exact(x, head)).abs()
    bound = x.double().norm(dim=1)[:, None] * f.err.double() + stats[:, :1].double() * f.wnorm.double() \
        + stats[:, 1:].double() * f.tol.double()
    assert bool((gap <= bound).all())
    torch_int4 = quant.Int4Weight(Int8Weight(w[:4992])).err_norm  # torch's int4 copy (rows: a multiple of 16)
    assert float(f.err[:4992].median()) <= 1.05 * float(torch_int4.median())  # weights no further from int8
    assert float(bound[0].median()) <= 1.05 * float(x[0].norm() * torch_int4.median())  # a bound no looser
    assert torch.equal(best, coarse.argmax(-1))
    coarse2, best2, _ = cpu.int4_filter(f.packed, 5003, x[:1].repeat(2, 1))
    assert torch.equal(coarse2[1], coarse[0]) and best2.tolist() == [int(best[0])] * 2  # rows computed alike


@pytest.mark.skipif(not C_INT4, reason="no C int4 filter here (C kernels with AVX-512)")
def test_c_int4_candidates_are_the_torch_expressions_rows():
    """int4_filter_candidates keeps exactly the rows of its torch expression (the vector loop and
    the scalar tail of a width off 16), and batches of more than 64 rows are split."""
    gen = torch.Generator().manual_seed(13)
    v, b = 1003, 3
    c = torch.randn(b, v, generator=gen) * 4
    c[1, 1000] = c[1].max()
    err, wn, tol = (torch.rand(v, generator=gen) * s for s in (0.01, 1.0, 1e-4))
    xn, dn, l1 = (torch.rand(b, generator=gen) * s for s in (50, 1e-3, 100))
    fl = c.amax(1) - 0.5
    rel, slack = quant._BF16_REL, quant._SLACK
    t1 = xn[:, None] * err + dn[:, None] * wn
    ceiling = c + (c.abs() * rel + (t1 + l1[:, None] * tol) * (1 + rel)) + slack
    want = torch.nonzero((ceiling >= (fl - fl.abs() * rel - slack)[:, None]).any(0)).flatten()
    assert 0 < want.numel() < v and (want >= 992).any()
    assert torch.equal(cpu.int4_filter_candidates(c, err, wn, tol, xn, dn, l1, fl, rel, slack), want)
    w = torch.randn(3000, 64, generator=gen) * 0.05
    head = Int8Weight(w)
    greedy = GreedyHead(head, filter="int4c")
    x = torch.randn(70, 64, generator=gen) * 3
    assert greedy.argmax(x) == head.matmul(x).float().argmax(-1).tolist()
