"""A request in flight: its tokens, sampling state, block tables and finish status."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import torch

from engine.core.metrics import percentile
from engine.core.sampling import SamplingParams


@dataclass
class Sequence:
    seq_id: int
    prompt_ids: list[int]
    params: SamplingParams
    prompt: str | None = None
    output_ids: list[int] = field(default_factory=list)
    tables: list[list[int]] = field(default_factory=list)  # one block table per cache group
    num_cached: int = 0  # tokens whose K/V are in the cache
    rope_seq_len: int = 0  # dynamic NTK RoPE: fixed once the prompt is known
    generator: torch.Generator | None = None
    finish_reason: str | None = None  # "eos", "stop", "length"
    text: str = ""  # decoded output (stop strings cut off)
    emitted: int = 0  # characters of `text` already streamed
    prefill_target: int = -1  # tokens to prefill before decoding (-1: the prompt; after a
    # recompute preemption: every token but the last, which the next decode step feeds)
    block_hashes: list[str] = field(default_factory=list)  # chained hashes of full blocks (prefix cache)
    cached_tokens: int = 0  # prompt tokens whose K/V came from the prefix cache, not computed
    swapped: dict | None = None  # host copies of the blocks while preempted by swap
    arrival: float = 0.0  # perf_counter() when the request arrived
    first_token_time: float | None = None
    token_times: list[float] = field(default_factory=list)
    preemptions: int = 0
    register_limit: int = 1 << 62  # the prefix cache indexes only blocks before this position
    doc: tuple | None = None  # (offset, engine.kv.document_cache.DocumentKV) still to be placed
    prefill_cut: int = 0  # a block boundary the prefill also cuts at (0: none): where a head shared by
    # a batch ends (`LLM.generate_shared`), so the prefix cache can resume every request there

    @property
    def holds_placed_document(self) -> bool:
        """KV after `register_limit` came from a placed document (engine/kv/document_cache.py): it can be
        swapped out and back, never recomputed by a plain prefill."""
        return self.register_limit < self.num_tokens

    @property
    def all_ids(self) -> list[int]:
        return self.prompt_ids + self.output_ids

    @property
    def num_tokens(self) -> int:
        return len(self.prompt_ids) + len(self.output_ids)

    @property
    def prefill_len(self) -> int:
        return len(self.prompt_ids) if self.prefill_target < 0 else self.prefill_target

    @property
    def prefilling(self) -> bool:
        return self.num_cached < self.prefill_len

    @property
    def finished(self) -> bool:
        return self.finish_reason is not None

    def metrics(self) -> dict:
        """Per-request latency: time to first token, inter-token latency (mean, and p50 / p99 by
        `engine.core.metrics.percentile`) and decode tokens per second, in seconds; empty before
        the first token."""
        if self.first_token_time is None:
            return {}
        gaps = [b - a for a, b in itertools.pairwise(self.token_times)]
        out = {
            "ttft_s": self.first_token_time - self.arrival,
            "output_tokens": len(self.token_times),
            "cached_prompt_tokens": self.cached_tokens,
            "preemptions": self.preemptions,
        }
        if gaps:
            out["itl_mean_s"] = sum(gaps) / len(gaps)
            out["itl_p50_s"] = percentile(gaps, 50)
            out["itl_p99_s"] = percentile(gaps, 99)
            span = self.token_times[-1] - self.token_times[0]
            out["decode_tokens_per_s"] = len(gaps) / span if span > 0 else None
        return out
