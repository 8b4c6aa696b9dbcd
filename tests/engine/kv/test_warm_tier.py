"""The warm tier of the KV cache: INT8 pages of old blocks, read in place by attention.

Bounds used here:
- quantisation: every dequantised element within scale / 2 of its original (round to nearest),
  and the key summaries are exactly the min / max of the dequantised keys;
- decode / prefill over warm pages against the float32 reference computed from the same
  dequantised keys (longdoc_kernels.reference): 1e-5 absolute (only summation order differs);
- against the full-precision original (random unit-variance K/V, head_dim 16): 0.05 absolute on
  outputs of magnitude ~0.3-1 (measured max 0.012);
- tiny random-weight models end to end (block 4, sinks 4, hot window 8, so most blocks are warm):
  measured max |logit difference| to the all-hot run, bounds written next to the test.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from engine import LLM, CacheConfig, SchedulerConfig
from engine.attention.backend import TorchAttentionBackend
from engine.core.sampling import SamplingParams
from engine.core.sequence import Sequence
from engine.kv.paged_cache import PagedKVCache
from longdoc_kernels import dispatch, reference
from tests.engine.kv.warm_helpers import fill, layer_kv, make_cache, model_config, warm_budget_for
from tests.engine.tiny_models import VOCAB


def seq_tables(kv, n, seed=0):
    tables = kv.new_tables()
    fill(kv, tables, 0, n, torch.Generator().manual_seed(seed))
    kv.release_out_of_window(tables, n)  # as the runner does after each forward
    return tables


# ---------------------------------------------------------------------------------------- cache


def test_demote_moves_old_full_blocks_and_keeps_sinks_and_window_hot():
    kv = make_cache(sink_tokens=4, hot_window=8)  # block 4: one sink block, window of two blocks
    tables = seq_tables(kv, 37)  # blocks 0..9, block 9 holds one token
    glob, slide = tables
    hot_before = list(glob)
    free_before = kv.groups[0].allocator.num_free
    assert kv.demotable(glob, 37) == [1, 2, 3, 4, 5, 6]  # 7*4 = 28 <= 37 - 8 < 8*4
    assert kv.demote(tables, 37) == 6
    assert glob[0] == hot_before[0] and glob[7:] == hot_before[7:]
    assert all(e <= -2 for e in glob[1:7])
    assert sorted(-e - 2 for e in glob[1:7]) == list(range(6))  # table encoding: -(w + 2)
    assert kv.groups[0].allocator.num_free == free_before + 6  # hot blocks returned
    assert slide == [e for e in slide]  # the sliding group has no warm pool ...
    assert kv.groups[1].warm is None and all(e >= -1 for e in slide)
    assert kv.demote(tables, 37) == 0  # ... and demotion is idempotent
    fill(kv, tables, 37, 8, torch.Generator().manual_seed(1))  # 45 tokens: blocks 7, 8 leave the window
    assert kv.demote(tables, 45) == 2 and glob[7] <= -2 and glob[8] <= -2 and glob[9] >= 0
    kv.free(tables)
    assert kv.blocks_per_tier()["warm_used"] == [0, 0] and kv.blocks_per_tier()["hot_used"] == [0, 0]


def test_sinks_and_window_round_to_whole_blocks():
    kv = make_cache(sink_tokens=5, hot_window=6)  # sinks: 2 blocks; window: the last 6 tokens
    tables = seq_tables(kv, 30)  # blocks 0..7, block 7 half full
    assert kv.demotable(tables[0], 30) == [2, 3, 4, 5]  # block 5 ends at 24 = 30 - 6
    kv = make_cache(sink_tokens=0, hot_window=0)
    tables = seq_tables(kv, 30)
    assert kv.demotable(tables[0], 30) == list(range(7))  # every full block; the partial one stays


def test_warm_values_and_key_summaries():
    kv = make_cache(sink_tokens=4, hot_window=8)
    tables = seq_tables(kv, 40)
    before = {layer: layer_kv(kv, layer, tables[0], 40) for layer in (0, 2)}
    kv.demote(tables, 40)
    g = kv.groups[0]
    for j, layer in enumerate(g.layers):
        k0, v0 = before[layer]
        k1, v1 = layer_kv(kv, layer, tables[0], 40)
        w = kv.layer_warm(layer)
        for b, e in enumerate(tables[0][:10]):
            sl = slice(4 * b, 4 * b + 4)
            if e >= 0:
                assert torch.equal(k1[sl], k0[sl])
                continue
            wi = -e - 2
            assert torch.all((k1[sl] - k0[sl]).abs() <= w.ks[wi][None, :, None] / 2 + 1e-6)
            assert torch.all((v1[sl] - v0[sl]).abs() <= w.vs[wi][None, :, None] / 2 + 1e-6)
            torch.testing.assert_close(w.kmin[wi].float() * w.ks[wi][:, None], k1[sl].amin(0), rtol=0, atol=1e-6)
            torch.testing.assert_close(w.kmax[wi].float() * w.ks[wi][:, None], k1[sl].amax(0), rtol=0, atol=1e-6)
        assert w.kq.data_ptr() == g.warm.kq[j].data_ptr()


def test_full_warm_pool_leaves_blocks_hot():
    kv = make_cache(warm_blocks=3, sink_tokens=4, hot_window=4)
    tables = seq_tables(kv, 40)  # 10 blocks, 8 demotable
    assert kv.demote(tables, 40) == 3
    assert [e <= -2 for e in tables[0]] == [False, True, True, True] + [False] * 6  # oldest first
    assert kv.demote(tables, 40) == 0  # pool full: no-op, the rest stays hot
    tiers = kv.blocks_per_tier()
    assert tiers["warm_used"][0] == tiers["warm_total"][0] == 3
    kv.free(tables)
    assert kv.blocks_per_tier()["warm_used"][0] == 0


def test_demotion_resumes_where_a_full_pool_stopped_it():
    """demotable() walks back from the hot window's edge and stops at the first non-hot entry
    (O(new blocks) a step); after a full pool stopped demotion partway, it must still find every
    block a full scan would, as the pool frees and the sequence grows."""
    kv = make_cache(warm_blocks=5, sink_tokens=4, hot_window=4)

    def full_scan(table, n):
        limit = min(len(table), max(0, n - kv.hot_window) // kv.block_size)
        return [b for b in range(kv.sink_blocks, limit) if table[b] >= 0]

    other = seq_tables(kv, 24, seed=1)  # 6 blocks, 4 demotable
    assert kv.demote(other, 24) == 4
    tables = seq_tables(kv, 40)  # 10 blocks, 8 demotable, 1 warm block left
    assert kv.demotable(tables[0], 40) == full_scan(tables[0], 40) == list(range(1, 9))
    assert kv.demote(tables, 40) == 1
    assert kv.demotable(tables[0], 40) == full_scan(tables[0], 40) == list(range(2, 9))
    kv.free(other)  # 4 warm blocks free again
    assert kv.demote(tables, 40) == 4
    assert [e <= -2 for e in tables[0]] == [False] + [True] * 5 + [False] * 4
    fill(kv, tables, 40, 8, torch.Generator().manual_seed(2))  # the sequence grows by two blocks
    assert kv.demotable(tables[0], 48) == full_scan(tables[0], 48) == [6, 7, 8, 9, 10]
    kv.free(tables)
    assert kv.blocks_per_tier()["warm_used"][0] == 0


def test_shared_hot_block_is_decrefd_not_overwritten_and_warm_refcounts():
    kv = make_cache(sink_tokens=0, hot_window=0)
    a = seq_tables(kv, 8)  # two full blocks
    g = kv.groups[0]
    shared = a[0][0]
    g.allocator.incref(shared)  # another sequence holds block 0 too
    b = [[shared], []]
    content = g.k[:, shared].clone()
    assert kv.demote(a, 8) == 2
    assert g.allocator.ref_counts[shared] == 1 and torch.equal(g.k[:, shared], content)
    w = -a[0][0] - 2
    g.warm.allocator.incref(w)  # warm blocks can be shared like hot ones
    c = [[a[0][0]], []]
    kv.free(a)
    assert g.warm.allocator.ref_counts[w] == 1
    kv.free(c)
    kv.free(b)
    assert kv.blocks_per_tier()["hot_used"][0] == 0 and kv.blocks_per_tier()["warm_used"][0] == 0
    with pytest.raises(ValueError):
        g.warm.allocator.decref(w)


def test_release_out_of_window_handles_warm_entries():
    kv = make_cache(warm_blocks=8)
    g = kv.groups[0]
    g.window = 8  # pretend the warm group were a sliding one: its old warm entries must be released
    tables = [[g.allocator.allocate(), -2 - g.warm.allocator.allocate(), g.allocator.allocate(),
               g.allocator.allocate()], []]
    kv.release_out_of_window(tables, 16)  # next query at 16 sees 9..16: blocks 0, 1 go
    assert tables[0][:2] == [-1, -1] and tables[0][2] >= 0
    assert kv.blocks_per_tier()["warm_used"][0] == 0 and kv.blocks_per_tier()["hot_used"][0] == 2


def test_no_warm_tier_without_budget():
    for budget_blocks in (None, 0):
        kv = make_cache(warm_blocks=budget_blocks, sink_tokens=0, hot_window=0)
        tables = seq_tables(kv, 20)
        assert kv.layer_warm(0) is None and not kv.has_warm()
        assert kv.demote(tables, 20) == 0 and all(e >= 0 for e in tables[0])
        assert kv.blocks_per_tier()["warm_total"] == [0, 0]


def test_kv_bytes_per_token():
    cfg = model_config(windows=(None, None), kv_heads=2, head_dim=64)
    kv = make_cache(cfg, warm_blocks=64, block_size=16, sink_tokens=16, hot_window=32)
    n = 16 * 20
    tables = seq_tables(kv, n)
    hot = kv.kv_bytes_per_token(tables, n, hot_elem_size=2)
    assert hot == 2 * 2 * 2 * 64 * 2  # K and V, 2 layers, 2 heads, 64 dims, bf16
    kv.demote(tables, n)
    warm = kv.kv_bytes(tables, hot_elem_size=2)
    assert warm["hot"] == 3 * 16 * hot and warm["warm"] == 17 * 2 * kv.warm_block_layer_bytes
    per_warm_token = kv.warm_block_layer_bytes / 16 / (2 * 2 * 64 * 2)
    assert per_warm_token < 0.55  # int8 K/V + scales + int8 summaries vs bf16: 0.5 + 1/64 + 1/16
    assert kv.kv_bytes_per_token(tables, n, hot_elem_size=2) < 0.65 * hot


# ---------------------------------------------------------------------------------------- attention


def _demoted_cache(lengths, softcap_seed=0):
    kv = make_cache(sink_tokens=4, hot_window=8)
    seqs = []
    for i, n in enumerate(lengths):
        tables = seq_tables(kv, n, seed=10 + i)
        orig = layer_kv(kv, 0, tables[0], n)
        kv.demote(tables, n)
        seqs.append((tables, n, orig))
    return kv, seqs


def _padded(tables_list, gi=0):
    width = max(len(t[gi]) for t in tables_list)
    out = torch.full((len(tables_list), width), -1, dtype=torch.long)
    for i, t in enumerate(tables_list):
        out[i, : len(t[gi])] = torch.tensor(t[gi])
    return out


@pytest.mark.parametrize("lengths", [[37], [37, 22, 50]])
@pytest.mark.parametrize("softcap", [None, 5.0])
def test_torch_decode_with_warm_pages(lengths, softcap):
    kv, seqs = _demoted_cache(lengths)
    _, k_cache, v_cache = kv.layer_cache(0)
    warm = kv.layer_warm(0)
    tables = _padded([s[0] for s in seqs])
    lens = torch.tensor(lengths)
    q = torch.randn(len(lengths), 4, 16, generator=torch.Generator().manual_seed(5))
    be = TorchAttentionBackend()
    got = be.decode(q, k_cache, v_cache, tables, lens, scale=0.25, softcap=softcap, return_lse=True, warm=warm)
    ref, ref_lse = reference.paged_decode(q, k_cache, v_cache, tables, lens, scale=0.25, softcap=softcap,
                                          k_cache_int8=warm.kq, v_cache_int8=warm.vq, k_scale=warm.ks, v_scale=warm.vs)
    torch.testing.assert_close(got.out, ref, atol=1e-5, rtol=0)
    torch.testing.assert_close(got.lse, ref_lse, atol=1e-5, rtol=0)
    # against the full-precision keys and values the sequence had before demotion
    for i, (_, n, (k0, v0)) in enumerate(seqs):
        full, _ = reference.attention_rows(q[i : i + 1], k0, v0, torch.tensor([n - 1]), 0.25, None, softcap)
        assert (got.out[i] - full[0]).abs().max() < 0.05


def test_torch_prefill_with_warm_pages():
    kv, [(tables, n, (k0, v0))] = _demoted_cache([40])
    _, k_cache, v_cache = kv.layer_cache(0)
    warm = kv.layer_warm(0)
    table = torch.tensor(tables[0])
    q = torch.randn(6, 4, 16, generator=torch.Generator().manual_seed(6))
    be = TorchAttentionBackend()
    for return_lse in (False, True):
        got = be.prefill(q, k_cache, v_cache, table, q_offset=34, kv_len=40, scale=0.25, return_lse=return_lse, warm=warm)
        k1, v1 = layer_kv(kv, 0, tables[0], 40)
        ref, _ = reference.attention_rows(q, k1, v1, torch.arange(34, 40), 0.25)
        torch.testing.assert_close(got.out, ref, atol=1e-5, rtol=0)
        full, _ = reference.attention_rows(q, k0, v0, torch.arange(34, 40), 0.25)
        assert (got.out - full).abs().max() < 0.05


def triton_warm_check(device: str) -> None:
    """TritonAttentionBackend (kernels) against the torch backend over warm pages, decode and prefill."""
    from engine.attention.triton_backend import TritonAttentionBackend

    dev = torch.device(device)
    assert dispatch.use_triton(dev), "the kernels would not run here"
    kv, seqs = _demoted_cache([37, 22])
    _, k_cache, v_cache = (t.to(dev) if isinstance(t, torch.Tensor) else t for t in kv.layer_cache(0))
    w = kv.layer_warm(0)
    warm = type(w)(*(t.to(dev) for t in (w.kq, w.vq, w.ks, w.vs, w.kmin, w.kmax)))
    tables = _padded([s[0] for s in seqs]).to(dev)
    lens = torch.tensor([37, 22], device=dev)
    q = torch.randn(2, 4, 16, generator=torch.Generator().manual_seed(7)).to(dev)
    tri, ref = TritonAttentionBackend(), TorchAttentionBackend()
    a = tri.decode(q, k_cache, v_cache, tables, lens, scale=0.25, return_lse=True, warm=warm)
    b = ref.decode(q, k_cache, v_cache, tables, lens, scale=0.25, return_lse=True, warm=warm)
    torch.testing.assert_close(a.out, b.out, atol=2e-4, rtol=0)
    torch.testing.assert_close(a.lse, b.lse, atol=2e-4, rtol=0)
    qp = torch.randn(5, 4, 16, generator=torch.Generator().manual_seed(8)).to(dev)
    b = ref.prefill(qp, k_cache, v_cache, tables[0], q_offset=32, kv_len=37, scale=0.25, return_lse=True, warm=warm)
    for direct in (False, True):  # a dequantised copy of the visible blocks, or the INT8 pages read as they are
        a = TritonAttentionBackend(prefill_reads_int8=direct).prefill(
            qp, k_cache, v_cache, tables[0], q_offset=32, kv_len=37, scale=0.25, return_lse=True, warm=warm)
        torch.testing.assert_close(a.out, b.out, atol=2e-4, rtol=0)
        torch.testing.assert_close(a.lse, b.lse, atol=2e-4, rtol=0)


def test_triton_backend_with_warm_pages():
    """On CUDA in process; on the CPU in a child process with TRITON_INTERPRET=1, because Triton reads
    that switch when it is first imported (here, possibly long before this test)."""
    pytest.importorskip("triton")
    if torch.cuda.is_available():
        triton_warm_check("cuda")
        return
    code = (
        "import sys, torch; sys.path[:0] = [sys.argv[1]]; torch.set_num_threads(1); "
        "import tests.engine.kv.test_warm_tier as t; t.triton_warm_check('cpu'); print('ok')"
    )
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    r = subprocess.run([sys.executable, "-c", code, str(Path(__file__).parents[3])], env=env, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stderr[-3000:]


# ---------------------------------------------------------------------------------------- end to end

# max |logit difference| warm vs all-hot, tiny random-weight models (logit std 1.6-1.8), prompt 100
# tokens in chunks of 16 then 20 decode steps; block 4, sinks 4, hot window 8 (26 of 30 blocks warm).
# Measured over 3 prompts: llama 0.30-0.40 (all 4 layers global, so every layer reads INT8 keys; the
# random weights make attention very peaked), gemma3 0.0076-0.0091 (one global layer of 6).
TINY_BOUND = {"llama": 1.0, "gemma3": 0.05}


def tiny_llm(folder, **kw) -> LLM:
    kw.setdefault("kv_dtype", "float32")  # the warm tier's rounding measured against float32 pages
    cache = CacheConfig(block_size=4, memory_budget=16 * 2**20, **kw)
    return LLM(model=folder, device="cpu", dtype="float32", cache=cache,
               scheduler=SchedulerConfig(max_model_len=512, max_prefill_chunk=16))


def run_steps(llm: LLM, ids: list[int], n_prompt: int) -> tuple[torch.Tensor, int]:
    """Prefill ids[:n_prompt] in chunks, then feed the rest one decode step at a time (teacher
    forcing); demote after every forward as the engine's loop does. Returns the logits of every
    position and the most warm blocks seen in use."""
    seq = Sequence(0, ids[:n_prompt], SamplingParams(max_tokens=0))
    seq.tables = llm.kv.new_tables()
    seq.rope_seq_len = n_prompt
    outs, peak = [], 0
    while seq.prefilling:
        h = llm.runner.forward([(seq, min(16, n_prompt - seq.num_cached))], [])
        outs.append(llm.model.logits(h))
        llm.kv.demote(seq.tables, seq.num_cached)
        peak = max(peak, sum(llm.kv.blocks_per_tier()["warm_used"]))
    for t in ids[n_prompt:]:
        seq.output_ids.append(t)
        outs.append(llm.model.logits(llm.runner.forward([], [seq])))
        llm.kv.demote(seq.tables, seq.num_cached)
        peak = max(peak, sum(llm.kv.blocks_per_tier()["warm_used"]))
    llm.kv.free(seq.tables)
    return torch.cat(outs), peak


@pytest.mark.parametrize("family", ["llama", "gemma3"])
def test_tiny_model_warm_tier_logits_close_to_all_hot(tiny_folders, family):
    folder, _ = tiny_folders[family]
    ids = torch.randint(0, VOCAB, (120,), generator=torch.Generator().manual_seed(1)).tolist()
    hot, _ = run_steps(tiny_llm(folder), ids, 100)
    llm = tiny_llm(folder, warm_budget=2**20, sink_tokens=4, hot_window=8)
    warm, peak = run_steps(llm, ids, 100)
    assert peak >= 20, "the run should have held most blocks warm"
    assert torch.equal(warm[:16], hot[:16])  # the first chunk saw no warm block
    diff = (warm - hot).abs().max().item()
    assert 0 < diff < TINY_BOUND[family], diff
    assert (warm.argmax(-1) == hot.argmax(-1)).float().mean() > 0.9
    assert torch.isfinite(warm).all()
    assert llm.kv.blocks_per_tier()["warm_used"] == [0] * len(llm.kv.groups)


def test_generate_and_prompt_logits_use_the_warm_tier(tiny_folders):
    folder, _ = tiny_folders["gemma3"]
    ids = torch.randint(0, VOCAB, (60,), generator=torch.Generator().manual_seed(2)).tolist()
    llm = tiny_llm(folder, warm_budget=2**20, sink_tokens=4, hot_window=8)
    moved = []
    demote = llm.kv.demote
    llm.kv.demote = lambda tables, n, **k: moved.append(demote(tables, n, **k)) or moved[-1]
    out = llm.generate([ids, ids[:30]], SamplingParams(max_tokens=12, ignore_eos=True))
    assert sum(moved) > 0, "the engine's loop should demote after each forward"
    ref = tiny_llm(folder).generate([ids, ids[:30]], SamplingParams(max_tokens=12, ignore_eos=True))
    assert [len(o.token_ids) for o in out] == [12, 12]
    agree = sum(a == b for o, r in zip(out, ref, strict=True) for a, b in zip(o.token_ids, r.token_ids, strict=True))
    assert agree >= 20  # measured 24 of 24 (greedy, fp32); quantisation may flip a near tie
    assert llm.kv.blocks_per_tier()["warm_used"] == [0, 0] and llm.kv.blocks_per_tier()["hot_used"] == [0, 0]
    moved.clear()
    a = llm.prompt_logits(ids, chunk=8)
    assert sum(moved) > 0, "prompt_logits (prefill in chunks) should demote between chunks"
    b = tiny_llm(folder).prompt_logits(ids, chunk=8)
    assert 0 < (a - b).abs().max() < TINY_BOUND["gemma3"]  # measured 0.0078


def test_warm_sliding_demotes_in_window_blocks_and_releases_them():
    """With `warm_sliding` the sliding group gets its own warm pool, sized for its window: blocks
    still in the window but older than the hot window go INT8, and leaving the window frees them."""
    kv = make_cache(sink_tokens=4, hot_window=4, warm_sliding=True)  # window 8 = 2 blocks
    assert kv.groups[1].warm is not None
    assert kv.groups[1].warm.num_blocks == SchedulerConfig().max_num_seqs * (8 // 4 + 1)
    tables = seq_tables(kv, 37)  # sliding group: blocks 7, 8, 9 in its window
    glob, slide = tables
    assert slide[:7] == [-1] * 7 and all(e >= 0 for e in slide[7:])
    hot_before = slide[9]
    kv.demote(tables, 37)  # 37 - 4 = 33 -> blocks before 8 are older than the hot window
    assert slide[7] <= -2 and slide[8] >= 0 and slide[9] == hot_before
    assert kv.blocks_per_tier()["warm_used"][1] == 1
    fill(kv, tables, 37, 8, torch.Generator().manual_seed(1))
    kv.release_out_of_window(tables, 45)  # blocks before (45 - 8 + 1) // 4 = 9 leave the window
    assert slide[7] == -1 and kv.blocks_per_tier()["warm_used"][1] == 0
    kv.free(tables)
    assert kv.blocks_per_tier()["warm_used"] == [0, 0] and kv.blocks_per_tier()["hot_used"] == [0, 0]


def test_warm_sliding_takes_at_most_half_the_budget():
    cfg = model_config()
    small = warm_budget_for(cfg, 4)  # 4 blocks for the 2 global layers = 8 block-layers in all
    kv = PagedKVCache(cfg, CacheConfig(block_size=4, memory_budget=2**22, warm_budget=small, warm_sliding=True,
                                       kv_dtype="float32"),
                      torch.device("cpu"), torch.float32, SchedulerConfig(max_model_len=256))
    per = kv.warm_block_layer_bytes
    sliding = kv.groups[1].warm.num_blocks * len(kv.groups[1].layers) * per
    assert 0 < sliding <= small // 2
    assert kv.warm_bytes <= small and kv.groups[0].warm.num_blocks >= 1


def test_tiny_gemma_warm_sliding_logits_close_to_all_hot(tiny_folders):
    folder, _ = tiny_folders["gemma3"]
    ids = torch.randint(0, VOCAB, (120,), generator=torch.Generator().manual_seed(1)).tolist()
    hot, _ = run_steps(tiny_llm(folder), ids, 100)
    base, _ = run_steps(tiny_llm(folder, warm_budget=2**20, sink_tokens=4, hot_window=4), ids, 100)
    llm = tiny_llm(folder, warm_budget=2**20, sink_tokens=4, hot_window=4, warm_sliding=True)
    seen = []
    demote = llm.kv.demote

    def spy(tables, n, **k):
        out = demote(tables, n, **k)
        seen.append(llm.kv.blocks_per_tier()["warm_used"][1:])
        return out

    llm.kv.demote = spy
    warm, _ = run_steps(llm, ids, 100)
    assert any(sum(s) > 0 for s in seen), "the sliding groups should have held warm blocks"
    diff_base = (base - hot).abs().max().item()
    diff = (warm - hot).abs().max().item()
    assert diff > 0 and not torch.equal(warm, base)  # the sliding layers really read INT8
    assert diff < 4 * TINY_BOUND["gemma3"], (diff, diff_base)
    assert (warm.argmax(-1) == hot.argmax(-1)).float().mean() > 0.9
    assert llm.kv.blocks_per_tier()["warm_used"] == [0] * len(llm.kv.groups)


@pytest.mark.slow
@pytest.mark.parametrize("family", ["llama", "gemma3"])
def test_decode_with_warm_pages_always_passed_matches_the_checked_path(tiny_folders, family, monkeypatch):
    """A captured CUDA-graph step hands the decode backend the warm pages whether or not the
    tables hold a warm entry (`ForwardContext.warm_always`: the eager check reads the tables back
    to the host, which a capture cannot). Decoding that way, here on the CPU through the torch
    backend, gives the logits of the checked path: before the first demotion (no warm entry), and
    after it."""
    from engine.runner.forward_context import ForwardContext

    folder, _ = tiny_folders[family]
    ids = torch.randint(0, VOCAB, (80,), generator=torch.Generator().manual_seed(4)).tolist()
    kw = dict(warm_budget=2**20, sink_tokens=4, hot_window=8)
    checked, _ = run_steps(tiny_llm(folder, **kw), ids, 8)  # 8-token prompt: no warm entry at first
    seen = []
    original = ForwardContext._decode

    def forced(self, gi, q, k_cache, v_cache, warm, *a, **k):
        self.warm_always = True
        seen.append((warm is not None, bool((self.decode_block_tables[gi] <= -2).any())))
        return original(self, gi, q, k_cache, v_cache, warm, *a, **k)

    monkeypatch.setattr(ForwardContext, "_decode", forced)
    always, peak = run_steps(tiny_llm(folder, **kw), ids, 8)
    assert peak > 0 and (True, False) in seen and (True, True) in seen
    torch.testing.assert_close(always, checked, atol=1e-5, rtol=1e-5)


def watermark_cache(w):
    from engine.config import CacheConfig
    from engine.kv.paged_cache import PagedKVCache

    cfg = model_config()
    c = CacheConfig(block_size=4, memory_budget=100000, warm_budget=warm_budget_for(cfg, 64), sink_tokens=4,
                    hot_window=8, demote_watermark=w, kv_dtype="float32")  # the budget counts float32 pages
    limits = SchedulerConfig(max_model_len=256, max_prefill_chunk=16, max_num_seqs=2)
    return PagedKVCache(cfg, c, torch.device("cpu"), torch.float32, limits)


def test_demote_watermark_keeps_full_precision_while_the_hot_pool_has_room():
    kv = watermark_cache(0.5)
    g = kv.groups[0]
    assert g.num_blocks == 41  # watermark: 20 blocks
    small = seq_tables(kv, 37, seed=1)  # 10 hot blocks, 6 of them demotable
    assert kv.demote(small, 37) == 0 and g.allocator.num_used == 10  # under the watermark: all hot
    big, gen = kv.new_tables(), torch.Generator().manual_seed(2)
    for start in range(0, 100, 16):  # in chunks, as a prefill allocates (the sliding pool is small)
        fill(kv, big, start, min(16, 100 - start), gen)
        kv.release_out_of_window(big, min(start + 16, 100))
    # 25 more: 35 in use, 15 over
    before = list(big[0])
    moved = kv.demote(big, 100)
    assert moved == 15 and g.allocator.num_used == 20  # down to the watermark, no further
    assert all(e <= -2 for e in big[0][1:16]) and big[0][16:] == before[16:]  # the oldest went first
    assert big[0][0] == before[0]  # the sink stays hot
    assert kv.demote(small, 37) == 0  # at the watermark: nothing more
    assert kv.demote(small, 37, force=True) == 6  # pressure (the scheduler): every demotable block
    kv.free(small)
    kv.free(big)
    assert kv.blocks_per_tier()["warm_used"] == [0, 0] and kv.blocks_per_tier()["hot_used"] == [0, 0]


@pytest.mark.parametrize("w", [0.0, 1.5, -0.1])
def test_demote_watermark_out_of_range_is_refused(w):
    with pytest.raises(ValueError, match="demote_watermark"):
        watermark_cache(w)


def test_scheduler_demotes_before_it_preempts(tiny_folders):
    """A hot pool too small for four 70-token sequences at full precision, a warm pool with room,
    and demote_watermark 1.0 (no demotion while blocks last): the scheduler demotes old blocks
    under pressure instead of preempting, and every request completes; without the warm tier
    the same budget preempts."""
    folder, _ = tiny_folders["llama"]
    prompts = [torch.randint(0, VOCAB, (30,), generator=torch.Generator().manual_seed(20 + i)).tolist()
               for i in range(4)]
    params = SamplingParams(max_tokens=40, ignore_eos=True)

    def run(**kw):
        cache = CacheConfig(block_size=4, memory_budget=4 * 2 * 4 * 2 * 16 * 4 * 28, kv_dtype="float32", **kw)
        llm = LLM(model=folder, device="cpu", dtype="float32", cache=cache,
                  scheduler=SchedulerConfig(max_model_len=512, max_prefill_chunk=16, preemption="swap",
                                            watermark=0.95))
        out = llm.generate(prompts, params)
        assert [len(o.token_ids) for o in out] == [40] * 4
        return llm

    plain = run()
    assert plain.sched_counters.preempted_swap > 0
    relieved = run(warm_budget=2**20, sink_tokens=4, hot_window=8, demote_watermark=1.0)
    assert relieved.kv.groups[0].num_blocks == plain.kv.groups[0].num_blocks
    assert relieved.sched_counters.preempted_swap + relieved.sched_counters.preempted_recompute == 0
    assert relieved.kv.blocks_per_tier()["warm_used"] == [0] * len(relieved.kv.groups)
