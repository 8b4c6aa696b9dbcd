"""Per-request latency metrics and engine counters, from explicit timestamps."""

from __future__ import annotations

import json

import pytest

from engine.core.metrics import EngineCounters, RequestMetrics, percentile, summarize


def test_percentile_nearest_rank():
    values = list(range(1, 101))  # 1..100
    assert percentile(values, 50) == 50 and percentile(values, 99) == 99 and percentile(values, 100) == 100
    assert percentile([3.0, 1.0, 2.0], 50) == 2.0 and percentile([7.0], 99) == 7.0
    assert percentile([], 50) is None
    with pytest.raises(ValueError):
        percentile([1.0], 0)


def test_request_metrics_from_token_times():
    m = RequestMetrics.start(prompt_tokens=100, now=10.0)
    assert m.ttft is None and m.to_dict()["itl_mean_s"] is None and m.tokens_per_s is None
    m.record_token(10.5)
    assert m.ttft == 0.5 and m.itl_p50 is None and m.decode_tokens_per_s is None
    for t in (10.6, 10.7, 10.8, 11.5):  # gaps 0.1, 0.1, 0.1, 0.7
        m.record_token(t)
    assert m.output_tokens == 5 and m.first_token_time == 10.5
    assert m.itl_mean == pytest.approx(0.25)
    assert m.itl_p50 == pytest.approx(0.1) and m.itl_p99 == pytest.approx(0.7)
    assert m.decode_tokens_per_s == pytest.approx(4 / 1.0)
    assert m.tokens_per_s == pytest.approx(5 / 1.5)
    d = m.to_dict()
    assert d["ttft_s"] == 0.5 and d["prompt_tokens"] == 100 and d["output_tokens"] == 5
    json.dumps(d)
    with pytest.raises(ValueError):
        m.record_token(11.0)  # backwards
    with pytest.raises(ValueError):
        RequestMetrics(arrival=5.0).record_token(4.0)


def test_engine_counters():
    c = EngineCounters()
    assert c.prefix_hit_rate is None and c.fragmentation == 0.0
    c.set_blocks("hot", 12)
    c.set_blocks("disk", 300)
    c.record_prefix_lookup(10, 4)
    c.record_prefix_lookup(10, 10)
    c.set_occupancy(tokens_stored=100, slots_allocated=128)
    c.swaps_out += 2
    c.preemptions += 3
    c.fallbacks += 1
    d = c.to_dict()
    assert d["blocks"] == {"hot": 12, "warm": 0, "host": 0, "disk": 300}
    assert d["prefix_hit_rate"] == pytest.approx(0.7) and d["prefix_queries"] == 20
    assert d["fragmentation"] == pytest.approx(28 / 128)
    assert (d["swaps_out"], d["swaps_in"], d["preemptions"], d["fallbacks"]) == (2, 0, 3, 1)
    json.dumps(d)
    d["blocks"]["hot"] = 0
    assert c.blocks["hot"] == 12  # to_dict is a copy
    for bad in (lambda: c.set_blocks("gpu", 1), lambda: c.record_prefix_lookup(1, 2),
                lambda: c.set_occupancy(10, 5), lambda: c.set_blocks("hot", -1)):
        with pytest.raises(ValueError):
            bad()


def test_summarize_pools_requests():
    a = RequestMetrics(arrival=0.0)
    for t in (1.0, 1.1, 1.2):
        a.record_token(t)
    b = RequestMetrics(arrival=0.5)
    for t in (3.5, 4.5):
        b.record_token(t)
    s = summarize([a, b, RequestMetrics(arrival=0.2)])
    assert s["requests"] == 3 and s["output_tokens"] == 5
    assert s["ttft_mean_s"] == pytest.approx(2.0) and s["ttft_p99_s"] == pytest.approx(3.0)
    assert s["itl_p50_s"] == pytest.approx(0.1) and s["itl_p99_s"] == pytest.approx(1.0)
    assert s["tokens_per_s"] == pytest.approx(5 / 4.5)
    empty = summarize([])
    assert empty["requests"] == 0 and empty["ttft_mean_s"] is None and empty["tokens_per_s"] is None


def test_percentile_is_numpys_inverted_cdf_everywhere():
    """One definition: nearest rank, numpy's method="inverted_cdf", also for a request's own
    GenerationOutput.metrics (engine.core.sequence)."""
    import numpy as np

    from engine.core.sampling import SamplingParams
    from engine.core.sequence import Sequence

    rng = np.random.default_rng(0)
    for n in (1, 2, 3, 4, 10, 101):
        values = rng.random(n).tolist()
        for p in (1, 25, 50, 90, 99, 100):
            assert percentile(values, p) == float(np.percentile(values, p, method="inverted_cdf"))
    seq = Sequence(0, [1], SamplingParams())
    seq.arrival, seq.first_token_time = 0.0, 1.0
    seq.token_times = [1.0, 1.1, 1.3, 1.6, 2.0]  # gaps 0.1, 0.2, 0.3, 0.4
    m = seq.metrics()
    gaps = [0.1, 0.2, 0.3, 0.4]
    assert m["itl_p50_s"] == pytest.approx(0.2) and m["itl_p99_s"] == pytest.approx(0.4)
    r = RequestMetrics(arrival=0.0)
    for t in seq.token_times:
        r.record_token(t)
    assert m["itl_p50_s"] == r.itl_p50 and m["itl_p99_s"] == r.itl_p99
    assert r.itl_p50 == pytest.approx(float(np.percentile(gaps, 50, method="inverted_cdf")))
