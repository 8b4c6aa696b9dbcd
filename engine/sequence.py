"""A request in flight: its tokens, sampling state, block tables and finish status."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from engine.sampling import SamplingParams


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

    @property
    def all_ids(self) -> list[int]:
        return self.prompt_ids + self.output_ids

    @property
    def num_tokens(self) -> int:
        return len(self.prompt_ids) + len(self.output_ids)

    @property
    def prefilling(self) -> bool:
        return self.num_cached < len(self.prompt_ids)

    @property
    def finished(self) -> bool:
        return self.finish_reason is not None
