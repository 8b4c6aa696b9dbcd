"""Sampling parameters and the sampler: repetition penalty, temperature, top-k, top-p, seeded
per-sequence random generators (so a sequence samples the same tokens alone or in a batch)."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch


@dataclass
class SamplingParams:
    """How to pick tokens. temperature 0 = greedy (the default: analysis wants reproducible output).

    top_k 0 = off; top_p 1.0 = off; repetition_penalty 1.0 = off (HF convention: the logits of every
    token already in the prompt or output are divided by it if positive, multiplied if negative).
    `stop`: strings that end generation (not included in the text); `seed`: per-request seed.
    """

    max_tokens: int = 64
    temperature: float = 0.0
    top_p: float = 1.0
    top_k: int = 0
    repetition_penalty: float = 1.0
    stop: list[str] | str | None = None
    stop_token_ids: list[int] = field(default_factory=list)
    seed: int | None = None
    ignore_eos: bool = False
    skip_special_tokens: bool = True

    def __post_init__(self) -> None:
        if isinstance(self.stop, str):
            self.stop = [self.stop]
        self.stop = [s for s in (self.stop or []) if s]
        if self.max_tokens < 0:
            raise ValueError("max_tokens must be >= 0")
        if self.temperature < 0:
            raise ValueError("temperature must be >= 0")
        if not 0 < self.top_p <= 1:
            raise ValueError("top_p must be in (0, 1]")
        if self.top_k < 0:
            raise ValueError("top_k must be >= 0")
        if self.repetition_penalty <= 0:
            raise ValueError("repetition_penalty must be > 0")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0


def apply_repetition_penalty(logits: torch.Tensor, seen: list[int], penalty: float) -> torch.Tensor:
    if penalty == 1.0 or not seen:
        return logits
    idx = torch.tensor(sorted(set(seen)), dtype=torch.long, device=logits.device)
    vals = logits[idx]
    logits = logits.clone()
    logits[idx] = torch.where(vals < 0, vals * penalty, vals / penalty)
    return logits


def sample_token(logits: torch.Tensor, params: SamplingParams, seen: list[int], generator: torch.Generator | None) -> int:
    """Pick one token from float32 logits [V]."""
    logits = apply_repetition_penalty(logits, seen, params.repetition_penalty)
    if params.greedy:
        return int(torch.argmax(logits))
    logits = logits / params.temperature
    if params.top_k > 0 and params.top_k < logits.shape[-1]:
        kth = torch.topk(logits, params.top_k).values[-1]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if params.top_p < 1.0:
        sorted_logits, order = torch.sort(logits, descending=False)
        cum = sorted_logits.softmax(-1).cumsum(-1)
        remove = cum <= (1 - params.top_p)
        remove[-1] = False
        logits = logits.masked_fill(remove.scatter(0, order, remove), float("-inf"))
    probs = torch.softmax(logits, -1)
    return int(torch.multinomial(probs.cpu(), 1, generator=generator))
