"""Observability: per-request latency (`RequestMetrics`) and engine-wide counters (`EngineCounters`).

Times are seconds from one clock (the engine uses `time.perf_counter()`); every method that records
an event takes the time explicitly or reads that clock. Both classes are plain dataclasses with a
`to_dict()` of JSON-ready values (None where a quantity is undefined, e.g. the inter-token latency
of a one-token answer). `longdoc bench --output-format json` (engine/bench.py) reports them;
`LLM.counters()` fills `EngineCounters`. A request's own `GenerationOutput.metrics` is computed by
`Sequence.metrics` (engine/core/sequence.py) with the same `percentile`.

Percentiles are nearest-rank (`percentile`): p-th percentile of n sorted values = value number
ceil(p/100 * n), numpy's `method="inverted_cdf"`. Every latency percentile the engine reports (a
request's `GenerationOutput.metrics`, `RequestMetrics`, `summarize`) uses it: a reported p50 or p99
is always a latency that was actually observed, never an interpolation between two.
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

TIERS = ("hot", "warm", "host", "disk")


def percentile(values: Sequence[float], p: float) -> float | None:
    """Nearest-rank percentile (0 < p <= 100) of `values`; None when empty."""
    if not 0 < p <= 100:
        raise ValueError("p must be in (0, 100]")
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)]


@dataclass
class RequestMetrics:
    """Arrival and token times of one request; everything else is derived from them."""

    arrival: float
    first_token_time: float | None = None
    token_times: list[float] = field(default_factory=list)  # every output token, the first included
    prompt_tokens: int = 0
    cached_prompt_tokens: int = 0  # prompt tokens whose KV came from a cache instead of a prefill

    @classmethod
    def start(cls, prompt_tokens: int = 0, now: float | None = None) -> RequestMetrics:
        return cls(arrival=time.perf_counter() if now is None else now, prompt_tokens=prompt_tokens)

    def record_token(self, now: float | None = None) -> None:
        """One output token emitted at `now`."""
        t = time.perf_counter() if now is None else now
        if self.token_times and t < self.token_times[-1]:
            raise ValueError("token times must not go backwards")
        if t < self.arrival:
            raise ValueError("a token cannot come before the request's arrival")
        if self.first_token_time is None:
            self.first_token_time = t
        self.token_times.append(t)

    @property
    def output_tokens(self) -> int:
        return len(self.token_times)

    @property
    def ttft(self) -> float | None:
        """Time to first token: arrival -> first output token."""
        return None if self.first_token_time is None else self.first_token_time - self.arrival

    @property
    def inter_token_latencies(self) -> list[float]:
        return [b - a for a, b in itertools.pairwise(self.token_times)]

    @property
    def itl_mean(self) -> float | None:
        gaps = self.inter_token_latencies
        return sum(gaps) / len(gaps) if gaps else None

    @property
    def itl_p50(self) -> float | None:
        return percentile(self.inter_token_latencies, 50)

    @property
    def itl_p99(self) -> float | None:
        return percentile(self.inter_token_latencies, 99)

    @property
    def decode_tokens_per_s(self) -> float | None:
        """Tokens after the first per second of decoding (first -> last token)."""
        if len(self.token_times) < 2:
            return None
        span = self.token_times[-1] - self.token_times[0]
        return (len(self.token_times) - 1) / span if span > 0 else None

    @property
    def tokens_per_s(self) -> float | None:
        """Output tokens per second end to end (arrival -> last token), prefill included."""
        if not self.token_times:
            return None
        span = self.token_times[-1] - self.arrival
        return len(self.token_times) / span if span > 0 else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "ttft_s": self.ttft,
            "itl_mean_s": self.itl_mean,
            "itl_p50_s": self.itl_p50,
            "itl_p99_s": self.itl_p99,
            "decode_tokens_per_s": self.decode_tokens_per_s,
            "tokens_per_s": self.tokens_per_s,
            "output_tokens": self.output_tokens,
            "prompt_tokens": self.prompt_tokens,
            "cached_prompt_tokens": self.cached_prompt_tokens,
        }


@dataclass
class EngineCounters:
    """Engine-wide counts: blocks per KV tier (a gauge, set), the rest cumulative (added to)."""

    blocks: dict[str, int] = field(default_factory=lambda: dict.fromkeys(TIERS, 0))
    prefix_queries: int = 0  # full prompt blocks looked up in the prefix cache
    prefix_hits: int = 0  # of which found (any tier)
    swaps_out: int = 0  # sequences preempted by swapping their KV out
    swaps_in: int = 0
    preemptions: int = 0  # by swap or by recompute
    fallbacks: int = 0  # requests served through a fallback strategy (truncate, retrieve, ...)
    tokens_stored: int = 0  # gauge: tokens whose KV the allocated slots hold
    slots_allocated: int = 0  # gauge: block_size * allocated blocks
    copy_bytes_to_host: int = 0  # KV bytes the tier copier moved device -> host (swap out, warm saves)
    copy_bytes_to_device: int = 0  # and host -> device (swap in, cold-tier prefix loads)
    spec_drafted: int = 0  # prompt-lookup draft tokens verified (engine/core/speculative.py)
    spec_accepted: int = 0  # of which accepted (each saved a decode step)

    def set_blocks(self, tier: str, count: int) -> None:
        if tier not in self.blocks:
            raise ValueError(f"unknown tier {tier!r}; have {tuple(self.blocks)}")
        if count < 0:
            raise ValueError("block count must be >= 0")
        self.blocks[tier] = count

    def record_prefix_lookup(self, queried: int, hit: int) -> None:
        """`queried` blocks looked up, `hit` of them found."""
        if not 0 <= hit <= queried:
            raise ValueError("need 0 <= hit <= queried")
        self.prefix_queries += queried
        self.prefix_hits += hit

    def set_occupancy(self, tokens_stored: int, slots_allocated: int) -> None:
        if not 0 <= tokens_stored <= slots_allocated:
            raise ValueError("need 0 <= tokens_stored <= slots_allocated")
        self.tokens_stored, self.slots_allocated = tokens_stored, slots_allocated

    @property
    def prefix_hit_rate(self) -> float | None:
        return self.prefix_hits / self.prefix_queries if self.prefix_queries else None

    @property
    def fragmentation(self) -> float:
        """1 - tokens stored / slots allocated: the share of allocated KV slots holding nothing."""
        return 1.0 - self.tokens_stored / self.slots_allocated if self.slots_allocated else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "blocks": dict(self.blocks),
            "prefix_queries": self.prefix_queries,
            "prefix_hits": self.prefix_hits,
            "prefix_hit_rate": self.prefix_hit_rate,
            "swaps_out": self.swaps_out,
            "swaps_in": self.swaps_in,
            "preemptions": self.preemptions,
            "fallbacks": self.fallbacks,
            "tokens_stored": self.tokens_stored,
            "slots_allocated": self.slots_allocated,
            "fragmentation": self.fragmentation,
            "copy_bytes_to_host": self.copy_bytes_to_host,
            "copy_bytes_to_device": self.copy_bytes_to_device,
            "spec_drafted": self.spec_drafted,
            "spec_accepted": self.spec_accepted,
        }


def summarize(requests: Sequence[RequestMetrics]) -> dict[str, Any]:
    """Aggregate over requests: mean and p50/p99 TTFT, ITL pooled over all gaps, output tokens/s
    over the whole run (first arrival -> last token)."""
    ttfts = [r.ttft for r in requests if r.ttft is not None]
    gaps = [g for r in requests for g in r.inter_token_latencies]
    ends = [r.token_times[-1] for r in requests if r.token_times]
    tokens = sum(r.output_tokens for r in requests)
    span = max(ends) - min(r.arrival for r in requests) if ends else 0.0
    return {
        "requests": len(requests),
        "output_tokens": tokens,
        "ttft_mean_s": sum(ttfts) / len(ttfts) if ttfts else None,
        "ttft_p50_s": percentile(ttfts, 50),
        "ttft_p99_s": percentile(ttfts, 99),
        "itl_mean_s": sum(gaps) / len(gaps) if gaps else None,
        "itl_p50_s": percentile(gaps, 50),
        "itl_p99_s": percentile(gaps, 99),
        "tokens_per_s": tokens / span if span > 0 else None,
    }
