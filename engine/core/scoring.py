"""Scoring: log-probabilities of a continuation's tokens from the final hidden states of the
positions that predict them."""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class ScoreOutput:
    token_ids: list[int]  # the continuation's tokens
    tokens: list[str]
    logprobs: list[float]  # log p(token | everything before it)

    @property
    def total(self) -> float:
        return float(sum(self.logprobs))


def continuation_logprobs(logits_of, hidden: torch.Tensor, target_ids: list[int], rows: int = 256) -> list[float]:
    """log p(target_ids[i] | ...) from `hidden[i]`, the hidden state of the position before token i;
    `logits_of` maps hidden states to logits (the model's head). Computed `rows` positions at a time
    so that only rows x vocab logits exist at once."""
    target = torch.tensor(target_ids, device=hidden.device)
    out = []
    for s in range(0, hidden.shape[0], rows):
        lp = torch.log_softmax(logits_of(hidden[s : s + rows]), dim=-1)
        out.append(lp.gather(1, target[s : s + rows, None])[:, 0])
    return torch.cat(out).tolist()
