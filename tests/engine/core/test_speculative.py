"""Prompt-lookup speculative decoding (engine/core/speculative.py): the proposer's drafts, and the
engine's verified steps giving exactly the tokens of plain greedy decoding on the CPU's int8 path
(rows of the int8 kernels are computed independently of the batch, and a few-row chunk's attention
row by row as decode steps compute it), with rejected drafts' K/V dropped."""

from __future__ import annotations

import pytest

from engine import LLM, CacheConfig, EngineConfig, LoadConfig, SamplingParams, SchedulerConfig
from engine.core.sequence import Sequence
from engine.core.speculative import DraftGovernor, NgramProposer


def _seq(ids: list[int], out: list[int] = ()) -> Sequence:
    s = Sequence(0, list(ids), SamplingParams())
    s.output_ids = list(out)
    return s


def test_proposer_drafts_the_followers_of_the_latest_earlier_occurrence():
    p = NgramProposer(3, n_max=3, n_min=2)
    # suffix [7, 8] occurred at 1..2 (followed by 9 10 11) and at 6..7 (followed by 5 6): the latest wins
    s = _seq([1, 7, 8, 9, 10, 11, 7, 8, 5, 6, 0, 7, 8])
    assert p.propose(s, 3) == [5, 6, 0]
    assert p.propose(s, 1) == [5]  # at most k asked
    # the longest suffix that matches wins: [3, 7, 8] occurred once, followed by 42
    s2 = _seq([3, 7, 8, 42, 1, 7, 8, 9, 3, 7, 8])
    assert NgramProposer(3, n_max=3, n_min=2).propose(s2, 3) == [42, 1, 7]
    # the output counts as well as the prompt; past the sequence's end the period repeats
    s3 = _seq([4, 5, 6], [4, 5])
    assert NgramProposer(4, n_max=3, n_min=2).propose(s3, 4) == [6, 4, 5, 6]
    assert NgramProposer(3, n_max=3, n_min=2).propose(_seq([9, 9, 9]), 3) == [9, 9, 9]
    assert NgramProposer(3, n_max=3, n_min=2).propose(_seq([1, 2, 3, 4]), 3) == []  # nothing repeats


def test_proposer_indexes_new_tokens_and_backs_off_after_misses():
    p = NgramProposer(2, n_max=2, n_min=2)
    s = _seq([1, 2, 3])
    assert p.propose(s, 2) == []
    s.output_ids += [9, 1, 2]  # now [1, 2] repeats: the tokens after its first occurrence
    assert p.propose(s, 2) == [3, 9]
    p.record(s, 2, 0)  # a miss: skip the next proposal
    assert p.propose(s, 2) == []
    assert p.propose(s, 2) == [3, 9]
    p.record(s, 2, 0)  # a second miss in a row: skip the next 2
    assert p.propose(s, 2) == [] and p.propose(s, 2) == []
    assert p.propose(s, 2) == [3, 9]
    p.record(s, 2, 2)  # a hit resets the back-off
    p.record(s, 2, 0)
    assert p.propose(s, 2) == [] and p.propose(s, 2) == [3, 9]
    assert p.stats.drafted == 8 and p.stats.accepted == 2 and p.stats.steps == 4
    with pytest.raises(ValueError):
        NgramProposer(0)


def _int8_llm(folder, k: int, cache: CacheConfig | None = None, **sched) -> LLM:
    """The tests of exactness verify every draft found (adaptive_speculation off: no step's drafts
    depend on timings); test_governor_* turn it on."""
    sched.setdefault("adaptive_speculation", False)
    return LLM(config=EngineConfig(LoadConfig(model=folder, device="cpu", weights="int8"),
                                   cache or CacheConfig(memory_budget=8 * 2**20),
                                   SchedulerConfig(max_model_len=256, num_speculative_tokens=k, **sched)))


@pytest.mark.parametrize("family", ["gemma3", "llama"])
def test_verified_steps_give_plain_greedy_tokens_and_drop_rejected_kv(tiny_folders, family):
    """gemma3: sliding windows of 8 tokens, crossed inside verified chunks. Prompts that repeat
    themselves (drafts found) and random ones; one at a time and three at once."""
    import random

    folder, _ = tiny_folders[family]
    rng = random.Random(1)
    motif = [rng.randrange(128) for _ in range(7)]
    prompts = [motif * 5, [rng.randrange(128) for _ in range(40)], motif[:4] * 6 + [3, 1, 4]]
    params = SamplingParams(max_tokens=60, ignore_eos=True)
    plain, spec = _int8_llm(folder, 0), _int8_llm(folder, 3)
    assert spec.core.proposer is not None and plain.core.proposer is None
    want = [plain.generate([p], params)[0].token_ids for p in prompts]
    got = [spec.generate([p], params)[0].token_ids for p in prompts]
    assert got == want
    # three at once (the row budget shared): what plain decoding gives the same batch (a prefill step
    # computes a batch's prompts together, so a batch's tokens may differ from those alone)
    assert [o.token_ids for o in spec.generate(prompts, params)] == [o.token_ids for o in plain.generate(prompts, params)]
    assert spec.core.proposer.stats.accepted > 0
    assert spec.core.scheduler.counters.steps < plain.core.scheduler.counters.steps
    assert all(g.allocator.num_free == g.num_blocks for g in spec.kv.groups)  # rejected drafts' blocks too
    assert not spec.core.proposer.states  # finished sequences forgotten
    # the prefix cache indexed only real tokens: a repeated request reuses the prompt and matches
    again = spec.generate([prompts[0]], params)[0]
    assert again.token_ids == want[0] and again.cached_tokens > 0


class _Oracle(NgramProposer):
    """Drafts the plain run's next two tokens and then a wrong one: every verification accepts
    exactly two drafts and rejects the third (its K/V written, then dropped)."""

    def __init__(self, want: list[int], prompt_len: int) -> None:
        super().__init__(3)
        self.want, self.prompt_len = want, prompt_len

    def propose(self, seq, k):
        n = seq.num_tokens - self.prompt_len
        d = self.want[n:n + 2] + [(self.want[n + 2] + 1) % 128] if n + 2 < len(self.want) else []
        return d[:k] if len(d[:k]) == 3 else []


@pytest.mark.parametrize("family,warm", [("gemma3", False), ("llama", False), ("llama", True)])
def test_rejected_drafts_leave_no_trace(tiny_folders, family, warm):
    """Two accepted and one rejected draft every step, across block boundaries, (gemma3) sliding
    windows of 8 and (warm) blocks demoted to the INT8 warm tier behind a hot window of 16 tokens:
    the same tokens as plain decoding, every block back, and a later request over the same prompt
    reuses the prefix the verified steps registered."""
    folder, _ = tiny_folders[family]
    prompt = [7, 3, 9, 1, 4, 4, 2, 8, 6, 5, 0, 11, 13, 12, 17, 19, 23]
    params = SamplingParams(max_tokens=40, ignore_eos=True)
    cache = CacheConfig(memory_budget=8 * 2**20, warm_budget=2**20, sink_tokens=4, hot_window=16) if warm else None
    # prefill chunks of 16: the prefix cache can resume at every 16th token (its cut points)
    plain = _int8_llm(folder, 0, cache, max_prefill_chunk=16)
    spec = _int8_llm(folder, 3, cache, max_prefill_chunk=16)
    want = plain.generate([prompt], params)[0].token_ids
    moved, demote = [], spec.kv.demote
    spec.kv.demote = lambda tables, n, force=False, **k: moved.append(demote(tables, n, force, **k)) or moved[-1]
    spec.core.proposer = oracle = _Oracle(want, len(prompt))
    assert spec.generate([prompt], params)[0].token_ids == want
    assert oracle.stats.steps > 5 and oracle.stats.accepted == 2 * oracle.stats.steps
    assert oracle.stats.drafted == 3 * oracle.stats.steps
    assert all(g.allocator.num_free == g.num_blocks for g in spec.kv.groups)
    assert (sum(moved) > 0) == warm  # blocks went INT8 while drafts were verified over them
    if warm:
        assert all(g.warm.allocator.num_free == g.warm.allocator.num_blocks for g in spec.kv.groups if g.warm)
    # the prefix cache indexed the blocks of real tokens only, as plain decoding does
    p2, params2 = prompt + want[:20], SamplingParams(max_tokens=10, ignore_eos=True)
    again, ref = spec.generate([p2], params2)[0], plain.generate([p2], params2)[0]
    assert again.token_ids == ref.token_ids and again.cached_tokens == ref.cached_tokens
    assert again.cached_tokens == 32, again.cached_tokens


def test_drafts_respect_max_tokens_and_stop_at_eos(tiny_folders):
    folder, _ = tiny_folders["llama"]
    spec = _int8_llm(folder, 3)
    plain = _int8_llm(folder, 0)
    prompt = [5, 6, 7, 8] * 8
    for n in (1, 2, 5, 9):
        p = SamplingParams(max_tokens=n, ignore_eos=True)
        out = spec.generate([prompt], p)[0]
        assert len(out.token_ids) == n and out.token_ids == plain.generate([prompt], p)[0].token_ids
    # a stop token in the middle of an accepted run: the output ends there, as plain decoding's does
    full = plain.generate([prompt], SamplingParams(max_tokens=30, ignore_eos=True))[0].token_ids
    stop = full[12]
    p = SamplingParams(max_tokens=30, stop_token_ids=[stop])
    assert spec.generate([prompt], p)[0].token_ids == plain.generate([prompt], p)[0].token_ids


def test_sampling_requests_are_not_speculated(tiny_folders):
    folder, _ = tiny_folders["llama"]
    spec = _int8_llm(folder, 3)
    p = SamplingParams(max_tokens=20, temperature=0.8, seed=3, ignore_eos=True)
    spec.generate([[5, 6, 7, 8] * 8], p)
    assert spec.core.proposer.stats.steps == 0


def test_default_is_on_for_the_cpu_and_off_for_cuda():
    assert SchedulerConfig().speculative_tokens("cpu") == 3
    assert SchedulerConfig().speculative_tokens("cuda") == 0
    assert SchedulerConfig(num_speculative_tokens=2).speculative_tokens("cuda") == 2
    assert SchedulerConfig(num_speculative_tokens=0).speculative_tokens("cpu") == 0


@pytest.mark.model
def test_packaged_model_answers_the_same_with_fewer_steps():
    """The CPU default (packaged Gemma 3 270M, int8 weights, drafts on): questions over contract text
    give exactly the tokens of plain greedy decoding, in fewer forwards."""
    from pathlib import Path

    from engine.core.speculative import NgramProposer

    llm = LLM(device="cpu", cache=CacheConfig(memory_budget=64 * 2**20), max_model_len=2048)
    assert llm.weights == "int8" and llm.core.proposer is not None
    root = Path(__file__).resolve().parents[3]
    text = (root / "data/samples/contracts/en-commonpaper-csa-1.0-to-1.1/v1.txt").read_text(encoding="utf-8")
    doc = llm.encode(text)[:700]
    prompts = [doc + llm.encode(f"\n\nQuestion: {q}\nAnswer:") for q in
               ("Who are the parties to this agreement?", "Quote the first sentence of the agreement.")]
    params = SamplingParams(max_tokens=24, ignore_eos=True)
    governed = [llm.generate([p], params)[0].token_ids for p in prompts]  # the default: drafts as they pay
    llm.core.governor = None  # every draft found verified: the step count does not depend on timings
    steps = {}
    outs = {}
    for name, proposer in (("spec", llm.core.proposer), ("plain", None)):
        llm.core.proposer = proposer if proposer is None else NgramProposer(proposer.k)
        before = llm.core.scheduler.counters.steps
        outs[name] = [llm.generate([p], params)[0].token_ids for p in prompts]
        steps[name] = llm.core.scheduler.counters.steps - before
    assert outs["spec"] == outs["plain"] == governed
    assert steps["spec"] < steps["plain"], steps


def test_governor_drafts_only_what_pays():
    """A plain step first, then every draft count gets measured. Verify steps costing a plain step a row and
    drafts rarely accepted: none, once each count has been measured. Verify cheap and drafts mostly accepted: all three. Costs in
    between: the count with the most tokens per second. A count left unused is retried after
    REPROBE plain steps."""
    g = DraftGovernor(3)
    assert g.limit(1) == 0  # plain steps measured first
    g.observe(1, 0.010, False)
    assert g.limit(1) == 0
    g.observe(1, 0.011, False)
    assert g.cost(1) == 0.010
    assert g.limit(1) == 3  # 4 rows unmeasured, priced as a plain step: tried
    for _ in range(6):
        g.observe(4, 0.040, True)
        g.record(3, 0)
    assert g.limit(1) == 2  # the counts not measured yet are tried in turn (optimism)
    g.observe(3, 0.030, True)
    assert g.limit(1) == 2  # one step is not a measurement (it may have met a pause)
    g.observe(3, 0.031, True)
    assert g.limit(1) == 1
    g.observe(2, 0.020, True), g.observe(2, 0.020, True)
    assert g.limit(1) == 0  # every count measured: none pays
    for _ in range(g.REPROBE):
        g.observe(1, 0.010, False)
    assert g.limit(1) == 3  # re-measure: the context may have changed the costs
    assert g.cost(4) is None and g.cost(1) == 0.010
    cheap = DraftGovernor(3)
    cheap.observe(1, 0.010, False), cheap.observe(1, 0.010, False)
    for _ in range(6):
        cheap.observe(4, 0.012, True)
        cheap.record(3, 3)
    assert cheap.limit(1) == 3
    mid = DraftGovernor(3)
    for rows, secs in ((1, 0.010), (2, 0.011), (3, 0.016), (4, 0.022)) * 2:
        mid.observe(rows, secs, rows > 1)
    for _ in range(20):  # the first draft accepted 90% of the time, the later ones 20%
        mid.record(3, 1)
    mid.record(3, 0), mid.record(3, 0)
    assert 0.8 < mid.rate(1) < 0.95 and mid.rate(2) < 0.2
    assert mid.limit(1) == 1
    assert mid.limit(2) == 3  # two sequences: 8 rows (three drafts each) unmeasured, priced as 2 rows
    # costs are per octave of context: cheap verifies at 1K tokens say nothing of 8K
    ctx = DraftGovernor(3)
    for rows, secs in ((1, 0.010), (2, 0.011), (3, 0.0115), (4, 0.012)) * 2:
        ctx.observe(rows, secs, rows > 1, context=1500)
        ctx.record(3, 3)
    for rows, secs in ((1, 0.020), (4, 0.060), (3, 0.050), (2, 0.040)) * 2:
        ctx.observe(rows, secs, rows > 1, context=9000)
        ctx.record(3, 0)  # the first draft now accepted about half the time
    assert ctx.limit(1, context=1600) == 3 and ctx.limit(1, context=9100) == 0
    assert ctx.limit(1, context=20000) == 0  # a new octave: plain steps measured first


class _SlowVerify(DraftGovernor):
    """A machine where a step costs 10 ms a row: a verify of four rows is four plain steps."""

    def observe(self, rows, seconds, drafted, context=0):
        super().observe(rows, 0.010 * rows, drafted, context)


class _Wrong(NgramProposer):
    """Drafts k tokens every step, the first always wrong (never backing off)."""

    def __init__(self, want: list[int], prompt_len: int) -> None:
        super().__init__(3)
        self.want, self.prompt_len = want, prompt_len

    def propose(self, seq, k):
        n = seq.num_tokens - self.prompt_len
        return [(self.want[n] + 1) % 128] * min(k, 3) if n < len(self.want) else []


def test_governor_stops_drafts_that_cost_more_than_they_give(tiny_folders):
    """Verify steps priced at their rows (four rows: four plain steps) and drafts never accepted:
    the governed engine measures each draft count once and then decodes plainly (until REPROBE
    plain steps have passed), where the ungoverned one verifies every step; the tokens are plain
    decoding's either way."""
    import random

    folder, _ = tiny_folders["llama"]
    rng = random.Random(3)
    prompt = [rng.randrange(128) for _ in range(130)]  # 130 + 60 tokens: one octave of context (128-255)
    params = SamplingParams(max_tokens=60, ignore_eos=True)
    want = _int8_llm(folder, 0).generate([prompt], params)[0].token_ids
    always = _int8_llm(folder, 3)
    always.core.proposer = _Wrong(want, len(prompt))
    assert always.generate([prompt], params)[0].token_ids == want
    governed = _int8_llm(folder, 3, adaptive_speculation=True)
    assert isinstance(governed.core.governor, DraftGovernor)
    governed.core.governor = slow = _SlowVerify(3)
    governed.core.proposer = _Wrong(want, len(prompt))
    assert governed.generate([prompt], params)[0].token_ids == want
    assert always.core.proposer.stats.steps >= 55
    assert governed.core.proposer.stats.steps <= 6, governed.core.proposer.stats  # k = 3, 2, 1 twice each
    assert slow.cost(1, len(prompt) + 30) == pytest.approx(0.010) and slow.limit(1, len(prompt) + 30) == 0
    assert _int8_llm(folder, 3).core.governor is None  # adaptive_speculation off
