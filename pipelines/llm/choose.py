"""Decisions by scoring: the log-probability of each of a few labelled continuations of a prompt.

`choose(llm, prompt, {"yes": " yes", "no": " no"})` returns the label whose continuation the model
finds most likely, every label's log-probability (summed over its tokens) and the margin between
the best and the second. A small base model decides between options this way without free
generation. When every continuation is one token, one forward over the prompt scores them all
(the last position's log-softmax); otherwise each continuation is scored with `LLM.score`.
`choose_batch` decides several prompts with the same options.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pipelines.llm.settings import engine_lock


@dataclass(frozen=True)
class Choice:
    """label: the most likely option; logprobs: label -> log p(continuation | prompt); margin: the
    best log-probability minus the second best (inf with one option)."""

    label: str
    logprobs: dict[str, float]
    margin: float

    def to_dict(self) -> dict:
        return {"label": self.label, "logprobs": {k: round(v, 4) for k, v in self.logprobs.items()},
                "margin": round(self.margin, 4)}


def choose(llm, prompt: str, options: Mapping[str, str]) -> Choice:
    """The option (label -> continuation text) with the highest log-probability after `prompt`."""
    if not options:
        raise ValueError("choose() needs at least one option")
    ids = {label: llm.encode(cont, add_special_tokens=False) for label, cont in options.items()}
    if any(not t for t in ids.values()):
        raise ValueError("every option needs a non-empty continuation")
    with engine_lock(llm):
        if all(len(t) == 1 for t in ids.values()):
            import torch

            last = torch.log_softmax(llm.prompt_logits(prompt, last=1)[-1].float(), dim=-1)
            scores = {label: float(last[t[0]]) for label, t in ids.items()}
        else:
            scores = {label: llm.score(prompt, t).total for label, t in ids.items()}
    ranked = sorted(scores.items(), key=lambda kv: -kv[1])
    margin = ranked[0][1] - ranked[1][1] if len(ranked) > 1 else float("inf")
    return Choice(ranked[0][0], scores, margin)


def choose_batch(llm, prompts: Sequence[str], options: Mapping[str, str]) -> list[Choice]:
    """`choose` for every prompt, with the same options."""
    return [choose(llm, p, options) for p in prompts]
