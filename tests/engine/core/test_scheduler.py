"""The scheduler and the prefix cache on tiny random-weight models (CPU, float32).

What must hold: a prefix served from the cache gives the same tokens as computing it (seeded
sampling too, which flips on any logit difference); sliding-window models reuse only the blocks
their window needs; the LRU evicts and stays correct; under a memory budget too small for all
requests the scheduler queues and preempts (swap or recompute) and every request completes with
the tokens it gets alone; identical concurrent requests run once; prefill chunks and decode
steps share forwards.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch

from engine import LLM, CacheConfig, SamplingParams, SchedulerConfig
from tests.engine.tiny_models import VOCAB, tiny_hf_model


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    out = {}
    for fam in ("llama", "gemma3"):
        folder = tmp_path_factory.mktemp(f"sched-{fam}")
        tiny_hf_model(fam, seed=3).save_pretrained(folder)
        out[fam] = folder
    return out


def make(folder, budget=2**24, chunk=16, seqs=4, sched=None, **kw) -> LLM:
    kw.setdefault("kv_dtype", "float32")  # budgets here are counted in float32 pages
    cache = CacheConfig(block_size=4, memory_budget=budget, **kw)
    sched = dataclasses.replace(sched or SchedulerConfig(), max_model_len=512, max_prefill_chunk=chunk, max_num_seqs=seqs)
    return LLM(model=folder, device="cpu", dtype="float32", cache=cache, scheduler=sched)


def toks(n: int, seed: int) -> list[int]:
    return torch.randint(0, VOCAB, (n,), generator=torch.Generator().manual_seed(seed)).tolist()


GREEDY = SamplingParams(max_tokens=24, ignore_eos=True)
SAMPLED = SamplingParams(max_tokens=24, temperature=1.0, seed=11, ignore_eos=True)


@pytest.mark.parametrize("family", ["llama", "gemma3"])
def test_cached_prefix_gives_identical_tokens(folders, family):
    llm = make(folders[family])
    p = toks(70, 1)
    first = llm.generate([p], SAMPLED)[0]
    again = llm.generate([p], SAMPLED)[0]
    assert first.cached_tokens == 0
    assert again.cached_tokens == 68  # the prompt's tail: the last block boundary before its final token
    assert again.token_ids == first.token_ids
    fresh = make(folders[family]).generate([p], SAMPLED)[0]
    assert fresh.token_ids == first.token_ids


@pytest.mark.parametrize("family", ["llama", "gemma3"])
def test_repeated_prompt_of_one_chunk_hits_up_to_its_tail(folders, family):
    """A prompt no longer than one chunk (`longdoc bench --prompt-length 1024` with 1024-token
    chunks) is served from the cache on its second request up to its tail, with logits and tokens
    identical to a fresh engine's (the first run cut its chunks there too)."""
    llm = make(folders[family])
    p = toks(16, 21)  # exactly one chunk of 16
    first = llm.generate([p], SAMPLED)[0]
    again = llm.generate([p], SAMPLED)[0]
    assert (first.cached_tokens, again.cached_tokens) == (0, 12)
    assert again.token_ids == first.token_ids == make(folders[family]).generate([p], SAMPLED)[0].token_ids
    assert llm.prefix.stats.hit_rate > 0.3


def test_tail_hit_only_where_a_run_cut_there(folders):
    """The prefix of a longer prompt is served up to a grid point, not up to its own tail: the longer
    prompt's run did not cut its chunks at that tail, so resuming there would not be bit-exact."""
    llm = make(folders["llama"])
    a = toks(40, 22)
    llm.generate([a], GREEDY)
    out = llm.generate([a[:30]], GREEDY)[0]  # tail 28, grid point 16
    assert out.cached_tokens == 16
    assert out.token_ids == make(folders["llama"]).generate([a[:30]], GREEDY)[0].token_ids


@pytest.mark.parametrize("family", ["llama", "gemma3"])
def test_shared_prefix_different_question(folders, family):
    llm = make(folders[family])
    doc = toks(80, 2)
    llm.generate([doc + toks(5, 3)], GREEDY)
    out = llm.generate([doc + toks(7, 4)], GREEDY)[0]
    assert out.cached_tokens == 80
    assert out.token_ids == make(folders[family]).generate([doc + toks(7, 4)], GREEDY)[0].token_ids
    # prefix stats count it
    assert llm.prefix.stats.hit_tokens >= 80


def test_sliding_window_hit_takes_only_window_blocks(folders):
    llm = make(folders["gemma3"])
    glob, slide = llm.kv.groups
    assert slide.window == 8
    doc = toks(64, 5)
    llm.generate([doc + [1, 2, 3]], GREEDY)
    seen = []
    orig = llm.runner.forward

    def spy(prefills, decodes, capture=None, **kw):
        for s, _ in prefills:
            seen.append([list(t) for t in s.tables])
        return orig(prefills, decodes, capture, **kw)

    llm.runner.forward = spy
    out = llm.generate([doc + [4, 5]], GREEDY)[0]
    assert out.cached_tokens == 64
    g_table, s_table = seen[0]
    assert all(b >= 0 for b in g_table[:16])  # every global block
    assert s_table[:14] == [-1] * 14 and all(b >= 0 for b in s_table[14:16])  # window 8 = 2 blocks


def test_lru_eviction_stays_correct(folders):
    llm = make(folders["llama"], budget=4 * 2 * 4 * 2 * 16 * 4 * 70, seqs=1)  # ~70 blocks
    n = llm.kv.groups[0].num_blocks
    a = toks(40, 6)
    ref = llm.generate([a], GREEDY)[0].token_ids
    for i in range(n // 10 + 2):  # enough other prompts to reuse every block
        llm.generate([toks(40, 100 + i)], GREEDY)
    out = llm.generate([a], GREEDY)[0]
    assert out.cached_tokens == 0 and out.token_ids == ref


@pytest.mark.parametrize("mode", ["swap", "recompute"])
def test_memory_pressure_queues_preempts_and_completes(folders, mode):
    prompts = [toks(30, 20 + i) for i in range(4)]
    params = SamplingParams(max_tokens=40, ignore_eos=True)
    alone = [make(folders["llama"]).generate([p], params)[0].token_ids for p in prompts]
    # blocks for ~1.5 sequences of 70 tokens: they cannot all run at once
    per_block = 4 * 2 * 4 * 2 * 16 * 4  # layers * (K+V) * block * kv_heads * head_dim * fp32
    llm = make(folders["llama"], budget=per_block * 28, sched=SchedulerConfig(preemption=mode, watermark=0.95))
    assert llm.kv.groups[0].num_blocks == 28
    out = llm.generate(prompts, params)
    assert [o.token_ids for o in out] == alone
    c = llm.sched_counters
    preempted = c.preempted_swap if mode == "swap" else c.preempted_recompute
    assert preempted > 0
    assert all(g.allocator.num_free == g.num_blocks for g in llm.kv.groups)
    # the engine-wide counters read the same events
    ec = llm.counters()
    assert ec.preemptions == c.preempted_swap + c.preempted_recompute > 0
    assert ec.swaps_out == c.preempted_swap and ec.swaps_in == c.swapped_in
    assert (ec.swaps_out > 0) == (mode == "swap")
    cs = llm.kv.copier.stats  # swaps go through the tier copier (a side stream on CUDA)
    assert (cs.gathers >= ec.swaps_out) and (cs.writes >= ec.swaps_in)
    assert (cs.bytes_to_host > 0) == (mode == "swap")
    assert ec.copy_bytes_to_host == cs.bytes_to_host and ec.to_dict()["copy_bytes_to_device"] == cs.bytes_to_device
    assert ec.blocks["hot"] == 0  # every request finished: nothing held
    assert 0.0 <= ec.fragmentation < 0.2 and ec.slots_allocated > 0


def test_admission_queues_under_watermark(folders):
    per_block = 4 * 2 * 4 * 2 * 16 * 4
    llm = make(folders["llama"], budget=per_block * 40, sched=SchedulerConfig(watermark=0.5))
    prompts = [toks(60, 40 + i) for i in range(3)]
    out = llm.generate(prompts, SamplingParams(max_tokens=4, ignore_eos=True))
    assert all(len(o.token_ids) == 4 for o in out)
    assert llm.sched_counters.queued_steps > 0  # 60 tokens = 15 blocks: only one fits under 20


def test_identical_requests_computed_once(folders):
    llm = make(folders["llama"])
    p = toks(20, 7)
    calls = []
    orig = llm.runner.forward

    def spy(prefills, decodes, capture=None, **kw):
        calls.append((len(prefills), len(decodes)))
        return orig(prefills, decodes, capture, **kw)

    llm.runner.forward = spy
    out = llm.generate([p, p, toks(20, 8), p], GREEDY)
    assert out[0].token_ids == out[1].token_ids == out[3].token_ids
    assert max(d for _, d in calls) == 2  # two distinct sequences decode, not four


def test_prefill_chunks_mix_with_decodes(folders):
    llm = make(folders["llama"], sched=SchedulerConfig(max_num_batched_tokens=64))
    calls = []
    orig = llm.runner.forward

    def spy(prefills, decodes, capture=None, **kw):
        calls.append(([(s.num_cached, n, s.prefill_len) for s, n in prefills], len(decodes)))
        return orig(prefills, decodes, capture, **kw)

    llm.runner.forward = spy
    short, long = toks(5, 9), toks(120, 10)
    out = llm.generate([short, long], SamplingParams(max_tokens=12, ignore_eos=True))
    assert any(p and d > 0 for p, d in calls)
    chunks = [c for p, _ in calls for c in p]
    # every chunk starts on the 16-token grid or at the prompt's tail (the last block boundary
    # before its final token, block size 4) and ends on the grid, at the tail or at the prompt's end
    def cut(x, end):
        return x % 16 == 0 or x == (end - 1) // 4 * 4

    assert all(cut(a, end) and (cut(a + n, end) or a + n == end) for a, n, end in chunks)
    ref = make(folders["llama"]).generate([long], SamplingParams(max_tokens=12, ignore_eos=True))[0]
    assert out[1].token_ids == ref.token_ids


def test_request_metrics_reported(folders):
    out = make(folders["llama"]).generate([toks(12, 12)], GREEDY)[0]
    m = out.metrics
    assert m["ttft_s"] > 0 and m["output_tokens"] == 24
    assert 0 < m["itl_p50_s"] <= m["itl_p99_s"] and m["decode_tokens_per_s"] > 0


@pytest.mark.parametrize("family", ["llama", "gemma3"])
def test_disk_tier_serves_a_new_engine(folders, family, tmp_path):
    """A second engine over the same disk store (as after a restart) skips the document's prefill
    and gives the tokens a fresh computation gives."""
    doc = toks(70, 30)
    a = make(folders[family], disk_cache_dir=str(tmp_path / "kv"))
    a.generate([doc + [1, 2]], GREEDY)
    assert a.prefix.stats.cold_writes > 0
    b = make(folders[family], disk_cache_dir=str(tmp_path / "kv"))
    out = b.generate([doc + [3, 4, 5]], GREEDY)[0]
    assert out.cached_tokens == 64 and b.prefix.stats.cold_hit_tokens == 64
    assert out.token_ids == make(folders[family]).generate([doc + [3, 4, 5]], GREEDY)[0].token_ids


def test_disk_tier_in_a_new_process(folders, tmp_path):
    import subprocess
    import sys

    doc = toks(70, 31)
    script = (
        "import json, sys\n"
        "from tests.engine.core.test_scheduler import make, GREEDY\n"
        f"llm = make({str(folders['gemma3'])!r}, disk_cache_dir={str(tmp_path / 'kv')!r})\n"
        f"o = llm.generate([{doc!r} + [int(sys.argv[1])]], GREEDY)[0]\n"
        "print(json.dumps([o.cached_tokens, o.token_ids]))\n"
    )
    runs = [subprocess.run([sys.executable, "-c", script, str(x)], capture_output=True, text=True, check=True)
            for x in (7, 9)]
    (c1, _), (c2, t2) = [__import__("json").loads(r.stdout.strip().splitlines()[-1]) for r in runs]
    assert c1 == 0 and c2 == 64
    assert t2 == make(folders["gemma3"]).generate([doc + [9]], GREEDY)[0].token_ids


def test_corrupt_disk_entry_is_ignored(folders, tmp_path):
    doc = toks(70, 32)
    a = make(folders["llama"], disk_cache_dir=str(tmp_path / "kv"))
    ref = a.generate([doc + [1]], GREEDY)[0].token_ids
    files = [f for f in (tmp_path / "kv").rglob("*") if f.is_file() and len(f.name) == 64]
    assert files
    for f in files:  # flip one payload byte in every entry
        data = bytearray(f.read_bytes())
        data[-5] ^= 0xFF
        f.write_bytes(bytes(data))
    b = make(folders["llama"], disk_cache_dir=str(tmp_path / "kv"))
    out = b.generate([doc + [1]], GREEDY)[0]
    assert out.cached_tokens == 0 and out.token_ids == ref


def test_default_step_budget_is_larger_on_gpu():
    """Without max_num_batched_tokens a CPU step carries one prefill chunk + the decodes; a CUDA
    step carries at least gpu_step_tokens of prefill (several sequences' chunks) + the decodes."""
    from types import SimpleNamespace

    from engine.core.scheduler import Scheduler

    def kv(dev):
        return SimpleNamespace(device=torch.device(dev), groups=[])

    assert Scheduler(kv("cpu"), SchedulerConfig(max_num_seqs=16, max_prefill_chunk=2048)).budget == 2048 + 16
    assert Scheduler(kv("cuda"), SchedulerConfig(max_num_seqs=16, max_prefill_chunk=2048)).budget == 16384 + 16
    assert Scheduler(kv("cuda"), SchedulerConfig(max_num_seqs=1, max_prefill_chunk=32768)).budget == 32768 + 1  # one chunk already larger
    assert Scheduler(kv("cuda"), SchedulerConfig(max_num_seqs=16, max_prefill_chunk=2048, max_num_batched_tokens=4096)).budget == 4096
    assert Scheduler(kv("cuda"), SchedulerConfig(max_num_seqs=16, max_prefill_chunk=2048, gpu_step_tokens=0)).budget == 2048 + 16
