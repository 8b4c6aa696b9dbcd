"""The Triton backend plugged into the engine's attention interface gives the same results as the
torch reference backend (CPU: through Triton's interpreter, small shapes)."""

from __future__ import annotations

import pytest
import torch

from engine.attention.backend import TorchAttentionBackend
from engine.attention.triton_backend import TritonAttentionBackend


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


def test_sdpa_causal_matches_paged_reference():
    """The fused-SDPA fast path for a chunk with nothing cached before it computes what the paged
    reference computes over the same K/V (GQA included)."""
    from engine.attention.triton_backend import sdpa_causal

    gen = torch.Generator().manual_seed(3)
    t, h, kvh, d, bs = 37, 6, 2, 32, 8
    q = torch.randn(t, h, d, generator=gen)
    k = torch.randn(t, kvh, d, generator=gen)
    v = torch.randn(t, kvh, d, generator=gen)
    nb = (t + bs - 1) // bs
    perm = torch.randperm(nb, generator=gen)
    k_cache = torch.randn(nb, bs, kvh, d, generator=gen)
    v_cache = torch.randn(nb, bs, kvh, d, generator=gen)
    for i in range(t):
        k_cache[perm[i // bs], i % bs] = k[i]
        v_cache[perm[i // bs], i % bs] = v[i]
    ref = TorchAttentionBackend().prefill(q, k_cache, v_cache, perm.to(torch.int32), q_offset=0, kv_len=t, scale=0.3)
    torch.testing.assert_close(sdpa_causal(q, k, v, 0.3), ref.out, atol=1e-5, rtol=0)
    assert TritonAttentionBackend().prefill_fresh(q, k, v, scale=0.3) is None  # CUDA only


def _tiny_llama_runs(backends: dict, seed: int, lengths: tuple[int, ...], max_tokens: int, logits_of: int | None = None):
    """Each backend's greedy tokens (and, with `logits_of`, the first prompt's last logits rows) on one
    tiny random Llama: blocks of 4, chunks of 16, no prefix cache."""
    from engine.config import CacheConfig, SchedulerConfig
    from engine.core.sampling import SamplingParams
    from engine.model.loader.random_weights import hf_to_engine_config, llm_from_model, random_model
    from tests.engine.tiny_models import tiny_hf_config

    cfg = hf_to_engine_config(tiny_hf_config("llama"))
    model = random_model(cfg, torch.device("cpu"), torch.float32, seed=seed)
    cache = CacheConfig(block_size=4, memory_budget=32 * 2**20)
    sched = SchedulerConfig(max_num_seqs=4, max_prefill_chunk=16, prefix_caching=False)
    gen = torch.Generator().manual_seed(seed)
    prompts = [torch.randint(3, cfg.vocab_size, (n,), generator=gen).tolist() for n in lengths]
    params = SamplingParams(max_tokens=max_tokens, ignore_eos=True)
    out = {}
    for tag, be in backends.items():
        llm = llm_from_model(model, cfg, device="cpu", dtype=torch.float32, backend=be, cache=cache, scheduler=sched)
        toks = [o.token_ids for o in llm.generate(prompts, params)]
        out[tag] = (toks, llm.prompt_logits(prompts[0], last=logits_of) if logits_of else None)
    return cfg, out


def test_prefill_fresh_routing():
    """ForwardContext offers every chunk with q_offset 0 to `prefill_fresh` (one prefill alone, or
    several with decodes in the batch) and never a chunk after a cached prefix; a backend that
    takes it gives the reference logits."""
    from engine.attention.triton_backend import sdpa_causal

    calls: list[int] = []

    class Fresh(TorchAttentionBackend):
        def prefill_fresh(self, q, k, v, *, scale, window=None, softcap=None):
            if window is not None or softcap is not None:
                return None
            calls.append(q.shape[0])
            return sdpa_causal(q, k, v, scale)

    lengths = (40, 9, 23)
    cfg, runs = _tiny_llama_runs({"fresh": Fresh(), "ref": TorchAttentionBackend()}, 2, lengths, 5, logits_of=40)
    assert runs["fresh"][0] == runs["ref"][0]
    torch.testing.assert_close(runs["fresh"][1], runs["ref"][1], atol=1e-4, rtol=0)
    # only first chunks (<= 16 tokens each, one per prompt per run) were offered, never later ones
    layers = cfg.num_layers
    assert calls and max(calls) <= 16
    assert len(calls) == layers * (len(lengths) + 1)


def test_several_chunks_in_one_prefill_launch(monkeypatch):
    """A step that prefills several sequences' chunks after a cached prefix (questions over a shared
    document) runs them as one varlen launch per layer on the Triton backend, with the tokens and
    logits of the torch backend's chunk-by-chunk prefill (Gemma: sliding-window and global layers)."""
    from engine.config import CacheConfig, SchedulerConfig
    from engine.core.sampling import SamplingParams
    from engine.model.loader.random_weights import hf_to_engine_config, llm_from_model, random_model
    from longdoc_kernels import dispatch
    from tests.engine.tiny_models import tiny_hf_config

    launches: list[int] = []
    real = dispatch.paged_prefill_varlen

    def counted(q, k_cache, v_cache, tables, items, **kw):
        launches.append(len(items))
        return real(q, k_cache, v_cache, tables, items, **kw)

    monkeypatch.setattr(dispatch, "paged_prefill_varlen", counted)
    cfg = hf_to_engine_config(tiny_hf_config("gemma3"))
    model = random_model(cfg, torch.device("cpu"), torch.float32, seed=5)
    cache = CacheConfig(block_size=4, memory_budget=32 * 2**20)
    sched = SchedulerConfig(max_num_seqs=4, max_prefill_chunk=64)
    gen = torch.Generator().manual_seed(1)
    head = torch.randint(3, cfg.vocab_size, (24,), generator=gen).tolist()
    tails = [torch.randint(3, cfg.vocab_size, (n,), generator=gen).tolist() for n in (5, 9, 3)]
    params = SamplingParams(max_tokens=3, ignore_eos=True)
    outs = {}
    for tag, be in (("triton", TritonAttentionBackend()), ("ref", TorchAttentionBackend())):
        llm = llm_from_model(model, cfg, device="cpu", dtype=torch.float32, backend=be, cache=cache, scheduler=sched)
        outs[tag] = [o.token_ids for o in llm.generate_shared(head, tails, params)]
    assert outs["triton"] == outs["ref"]
    assert launches and max(launches) == len(tails)  # the three questions' chunks in one launch per layer


def test_prefix_chunk_through_fused_sdpa_matches_paged_reference():
    """A chunk after a cached prefix, as the Triton backend runs it on CUDA (`contiguous_prefix`
    then `sdpa_causal` with the diagonal at the bottom right): the same output as the paged
    reference, for scattered block tables, a prefix ending mid-block, grouped-query heads and warm
    (INT8) blocks among the visible ones."""
    from engine.attention.triton_backend import contiguous_prefix, sdpa_causal
    from engine.kv.warm_tier import WarmPages

    gen = torch.Generator().manual_seed(5)
    h, kvh, d, bs, nblocks = 6, 2, 16, 4, 16
    k_cache = torch.randn(nblocks, bs, kvh, d, generator=gen)
    v_cache = torch.randn(nblocks, bs, kvh, d, generator=gen)
    nw = 3
    kq = torch.randint(-127, 128, (nw, bs, kvh, d), generator=gen, dtype=torch.int8)
    vq = torch.randint(-127, 128, (nw, bs, kvh, d), generator=gen, dtype=torch.int8)
    ks = torch.rand(nw, kvh, generator=gen) / 50
    vs = torch.rand(nw, kvh, generator=gen) / 50
    warm = WarmPages(kq, vq, ks, vs, kq.amin(1), kq.amax(1))
    ref = TorchAttentionBackend()
    hot_table = torch.tensor([9, 2, 14, 0, 7, 11, 3, 5], dtype=torch.int32)
    warm_table = torch.tensor([9, -2, 14, -4, -3, 11, 3, 5], dtype=torch.int32)  # warm blocks 0, 2, 1
    for table, w in ((hot_table, None), (warm_table, warm)):
        for q_offset, tq in ((12, 9), (5, 1), (13, 17), (0, 30)):
            kv_len = q_offset + tq
            q = torch.randn(tq, h, d, generator=gen)
            k, v = contiguous_prefix(k_cache, v_cache, table, kv_len, w)
            assert k.shape == (kv_len, kvh, d) and v.shape == (kv_len, kvh, d)
            got = sdpa_causal(q, k, v, 0.25)
            want = ref.prefill(q, k_cache, v_cache, table, q_offset=q_offset, kv_len=kv_len, scale=0.25, warm=w).out
            torch.testing.assert_close(got, want, atol=1e-5, rtol=0)
    # the same K/V but a top-left diagonal (torch's plain is_causal) would differ: the test can fail
    k, v = contiguous_prefix(k_cache, v_cache, hot_table, 21, None)
    q = torch.randn(9, h, d, generator=gen)
    top_left = torch.nn.functional.scaled_dot_product_attention(
        q.transpose(0, 1), k.repeat_interleave(3, 1).transpose(0, 1), v.repeat_interleave(3, 1).transpose(0, 1),
        is_causal=True, scale=0.25).transpose(0, 1)
    assert not torch.allclose(sdpa_causal(q, k, v, 0.25), top_left, atol=1e-3)


def test_long_chunks_after_a_prefix_leave_the_varlen_launch():
    """In a step of several chunks, the ones the backend `prefers_alone` go through `prefill` one by
    one (on CUDA: flash over the gathered prefix), the others together through `prefill_many`; the
    tokens and logits are the reference's either way."""

    class Recording(TorchAttentionBackend):
        long_rows = None  # prefers_alone for chunks of at least this many rows (None: never)

        def __init__(self):
            super().__init__()
            self.many: list[int] = []

        def prefers_alone(self, q, rows, window, softcap):
            return self.long_rows is not None and rows >= self.long_rows

        def prefill_many(self, q, k_cache, v_cache, tables, items, out, lse, **kw):
            self.many.extend(n for _, n, _ in items)
            return super().prefill_many(q, k_cache, v_cache, tables, items, out, lse, **kw)

    class Picky(Recording):
        long_rows = 12

    backends = {"picky": Picky(), "ref": Recording()}
    _, runs = _tiny_llama_runs(backends, 4, (44, 26, 30), 4)
    assert runs["picky"][0] == runs["ref"][0]
    assert max(backends["ref"].many) >= 12  # the batch has long chunks after a prefix in shared steps
    assert backends["picky"].many and max(backends["picky"].many) < 12  # which now run alone; short ones together


def test_two_partial_attentions_merged_equal_the_lower_right_causal_one():
    """What `sdpa_cudnn` computes for a chunk after a prefix, with exact attention in place of cuDNN:
    the queries over the prefix's keys (no mask) and over the chunk's own keys (causal), merged by
    their log-sum-exps, equal lower-right causal attention over all the keys."""
    from engine.attention.backend import _explicit
    from engine.attention.triton_backend import merge_partial_attention, sdpa_causal

    gen = torch.Generator().manual_seed(9)
    tq, p, h, d = 11, 23, 4, 16
    q = torch.randn(1, h, tq, d, generator=gen)
    k = torch.randn(1, h, p + tq, d, generator=gen)
    v = torch.randn(1, h, p + tq, d, generator=gen)
    o1, l1 = _explicit(q, k[:, :, :p], v[:, :, :p], None, 0.3, None)
    causal = torch.ones(tq, tq, dtype=torch.bool).tril()
    o2, l2 = _explicit(q, k[:, :, p:], v[:, :, p:], causal, 0.3, None)
    merged = merge_partial_attention(o1, l1, o2, l2.unsqueeze(-1))  # either lse shape
    want = sdpa_causal(q[0].transpose(0, 1), k[0].transpose(0, 1), v[0].transpose(0, 1), 0.3)
    torch.testing.assert_close(merged[0].transpose(0, 1), want, atol=1e-5, rtol=0)
    # without the second part's keys the result differs: the merge is not the identity
    assert not torch.allclose(o1[0].transpose(0, 1), want, atol=1e-3)


def _exact_call(shapes: list):
    """An exact stand-in for cuDNN's call (top-left causal or no mask) that records each call's
    (rows, keys, causal)."""
    from engine.attention.backend import _explicit

    def call(q, k, v, causal, scale):
        tq, tk = q.shape[2], k.shape[2]
        shapes.append((tq, tk, causal))
        mask = torch.ones(tq, tk, dtype=torch.bool).tril() if causal else None
        return _explicit(q, k, v, mask, scale, None)

    return call


@pytest.mark.parametrize("tq,p", [(11, 0), (16, 0), (11, 23), (8, 16), (5, 3), (13, 40), (1, 9)])
@pytest.mark.parametrize("align", [1, 8])
def test_cudnn_calls_with_aligned_lengths_equal_lower_right_causal_attention(tq, p, align):
    """`sdpa_cudnn`'s plan with exact attention in place of cuDNN: lengths padded to multiples of
    `align`, the prefix's unaligned remainder moved into the causal call as leading rows; the
    result equals lower-right causal attention over all the keys, and every call's lengths are
    multiples of `align`."""
    from engine.attention.triton_backend import sdpa_causal, sdpa_cudnn

    gen = torch.Generator().manual_seed(tq * 100 + p)
    h, kvh, d = 4, 2, 16
    q = torch.randn(tq, h, d, generator=gen)
    k, v = torch.randn(p + tq, kvh, d, generator=gen), torch.randn(p + tq, kvh, d, generator=gen)
    shapes: list = []
    got = sdpa_cudnn(q, k, v, 0.3, align=align, call=_exact_call(shapes))
    torch.testing.assert_close(got, sdpa_causal(q, k, v, 0.3), atol=1e-5, rtol=0)
    assert all(a % align == 0 and b % align == 0 for a, b, _ in shapes), shapes
    assert sum(1 for *_, causal in shapes if causal) == 1
    assert len(shapes) == (2 if p >= align else 1)


def test_fused_path_falls_back_and_remembers_only_real_refusals(monkeypatch):
    """`_fused` (called directly on CPU tensors): cuDNN out of memory falls back to flash for that
    call only; cuDNN refusing the case (RuntimeError) falls back and is not asked again."""
    import engine.attention.triton_backend as tb

    gen = torch.Generator().manual_seed(4)
    q, k, v = torch.randn(40, 4, 32, generator=gen), torch.randn(60, 2, 32, generator=gen), torch.randn(60, 2, 32, generator=gen)
    want = tb.sdpa_causal(q, k, v, 0.2)
    calls = []

    def refuse(exc):
        def f(*a):
            calls.append(exc)
            raise exc("no")
        return f

    be = TritonAttentionBackend()
    be.cudnn = True
    monkeypatch.setattr(tb, "sdpa_cudnn", refuse(torch.OutOfMemoryError))
    torch.testing.assert_close(be._fused(q, k, v, 0.2), want)
    assert be._cudnn_failed == set()
    torch.testing.assert_close(be._fused(q, k, v, 0.2), want)
    assert len(calls) == 2  # asked again after an out-of-memory
    monkeypatch.setattr(tb, "sdpa_cudnn", refuse(RuntimeError))
    torch.testing.assert_close(be._fused(q, k, v, 0.2), want)
    assert be._cudnn_failed == {(32, torch.float32, True)}
    be._fused(q, k, v, 0.2)
    assert len(calls) == 3  # not asked again after a refusal


def test_dense_warm_gather_equals_the_sparse_one():
    """`gather_blocks_tiered`'s torch form (CUDA's sync-free gather: every entry read hot and warm,
    `where` keeps the one named) returns the same K and V as the sparse gather for hot, warm and -1 entries."""
    from engine.attention.backend import gather_blocks
    from engine.kv.warm_tier import WarmPages
    from longdoc_kernels.reference import gather_blocks_tiered

    gen = torch.Generator().manual_seed(7)
    kvh, d, bs, nblocks, nw = 2, 8, 4, 10, 5
    k_cache = torch.randn(nblocks, bs, kvh, d, generator=gen)
    v_cache = torch.randn(nblocks, bs, kvh, d, generator=gen)
    kq = torch.randint(-127, 128, (nw, bs, kvh, d), generator=gen, dtype=torch.int8)
    vq = torch.randint(-127, 128, (nw, bs, kvh, d), generator=gen, dtype=torch.int8)
    ks, vs = torch.rand(nw, kvh, generator=gen) / 50, torch.rand(nw, kvh, generator=gen) / 50
    warm = WarmPages(kq, vq, ks, vs, kq.amin(1), kq.amax(1))
    for blocks in ([3, -2, 7, -6, -1, 0, -4], [-3, -2], [9, 1, 4], []):
        t = torch.tensor(blocks, dtype=torch.long)
        k1, v1 = gather_blocks(k_cache, v_cache, t, warm)
        k2, v2 = gather_blocks_tiered(k_cache, v_cache, t, kq, vq, ks, vs)
        assert torch.equal(k1, k2) and torch.equal(v1, v2), blocks
        assert any(b <= -2 for b in blocks) is not torch.equal(k2, k_cache.index_select(0, t.clamp(min=0)))
