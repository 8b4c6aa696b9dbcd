"""LLM.generate_shared: a batch of prompts that share a head computes the head once and shares its
blocks by reference; every request computes only its last partial block and its suffix, and the
greedy tokens equal each prompt generated alone."""

from __future__ import annotations

import pytest
import torch

from engine import LLM, CacheConfig, RequestCancelled, SamplingParams, SchedulerConfig
from tests.engine.tiny_models import VOCAB, tiny_hf_model


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    f = tmp_path_factory.mktemp("g3-shared")
    tiny_hf_model("gemma3", seed=11).save_pretrained(f)
    return f


def make(folder, **sched):
    return LLM(model=folder, device="cpu", dtype="float32", cache=CacheConfig(block_size=4, memory_budget=2**24),
               scheduler=SchedulerConfig(max_model_len=512, max_prefill_chunk=16, **sched))


def ids(seed: int, n: int) -> list[int]:
    return torch.randint(3, VOCAB, (n,), generator=torch.Generator().manual_seed(seed)).tolist()


def test_shared_head_matches_each_prompt_alone_and_is_computed_once(folder):
    llm = make(folder)
    head, suffixes = ids(0, 61), [ids(10 + k, 3 + k) for k in range(5)]  # 61: not on a block boundary
    params = SamplingParams(max_tokens=12)
    before = llm.prefix.stats.hit_tokens
    outs = llm.generate_shared(head, suffixes, params)
    cut = 60  # the head's last block boundary
    assert [o.cached_tokens for o in outs] == [cut] * 5  # every request took the head from the cache
    assert llm.prefix.stats.hit_tokens - before == 5 * cut
    assert all(o.metrics["ttft_s"] >= o.metrics["head_s"] > 0 for o in outs)  # the head is waited for too
    alone = make(folder, prefix_caching=False)
    for o, s in zip(outs, suffixes, strict=True):
        ref = alone.generate([head + s], params)[0]
        assert o.prompt_token_ids == head + s
        assert o.token_ids == ref.token_ids


def test_shared_head_blocks_are_shared_not_copied(folder):
    """While the batch runs, the global group holds the head's blocks once, not once per request."""
    llm = make(folder)
    head, suffixes = ids(1, 200), [ids(20 + k, 4) for k in range(6)]
    glob = llm.kv.groups[0]
    peak = []

    def watch(_p):
        peak.append(glob.num_blocks - glob.allocator.num_free)

    llm.generate_shared(head, suffixes, SamplingParams(max_tokens=4), on_step=watch)
    per_request_own = (200 % 4 + 4 + 4) // 4 + 2  # a partial head block, the suffix, the output, slack
    assert max(peak) <= 200 // 4 + 6 * per_request_own
    assert max(peak) < 2 * (200 // 4)  # copies would need six heads


def test_a_stop_during_the_head_raises_and_frees(folder):
    llm = make(folder)
    glob = llm.kv.groups[0]
    with pytest.raises(RequestCancelled):
        llm.generate_shared(ids(2, 100), [ids(3, 4), ids(4, 4)], on_step=lambda p: p.phase == "document")
    assert glob.allocator.num_used == 0


def test_a_head_shorter_than_a_block_is_plain_generation(folder):
    llm = make(folder)
    outs = llm.generate_shared(ids(5, 3), [ids(6, 5), ids(7, 5)], SamplingParams(max_tokens=3))
    assert [o.cached_tokens for o in outs] == [0, 0] and all(len(o.token_ids) == 3 for o in outs)


def test_several_heads_at_once_match_each_prompt_alone(folder):
    """Three documents with their questions in one call: each group's requests take their own head
    from the cache, and the greedy tokens equal each prompt generated alone."""
    llm = make(folder, max_num_seqs=8)
    groups = [(ids(30 + g, 41 + 10 * g), [ids(40 + 3 * g + k, 3 + k) for k in range(3)]) for g in range(3)]
    params = SamplingParams(max_tokens=8)
    outs = llm.generate_shared_batch(groups, params)
    alone = make(folder, prefix_caching=False)
    for (head, suffixes), got in zip(groups, outs, strict=True):
        cut = (len(head) // 4) * 4
        assert [o.cached_tokens for o in got] == [cut] * len(suffixes)
        for o, s in zip(got, suffixes, strict=True):
            assert o.token_ids == alone.generate([head + s], params)[0].token_ids


@pytest.mark.parametrize("family", ["gemma3", "llama"])  # with sliding-window layers, and without
def test_a_later_process_resumes_at_the_cut_from_disk(tmp_path, family):
    """A shared batch writes the head's cut to the disk store; a new engine over the same folder
    (nothing in memory) takes the whole head from disk for a later question, up to the cut, and its
    tokens equal the prompt computed from scratch."""
    folder = tmp_path / "m"
    tiny_hf_model(family, seed=12).save_pretrained(folder)

    def engine(**cache):
        return LLM(model=folder, device="cpu", dtype="float32",
                   cache=CacheConfig(block_size=4, memory_budget=2**24, **cache),
                   scheduler=SchedulerConfig(max_model_len=512, max_prefill_chunk=16))

    head = ids(8, 70)  # cut at 68: past the grid point 64
    disk = str(tmp_path / "kv")
    first = engine(disk_cache_dir=disk)
    first.generate_shared(head, [ids(9, 4), ids(10, 5)], SamplingParams(max_tokens=2))
    later = engine(disk_cache_dir=disk)
    params = SamplingParams(max_tokens=8)
    [out] = later.generate_shared(head, [ids(11, 6)], params)
    assert out.cached_tokens == 68 and later.prefix.stats.cold_hit_tokens == 68
    ref = engine().generate([head + ids(11, 6)], params)[0]
    assert out.token_ids == ref.token_ids
