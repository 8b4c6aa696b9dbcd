"""Sampling parameters and the sampler: repetition penalty, temperature, top-k, top-p, seeded
per-sequence random generators (so a sequence samples the same tokens alone or in a batch).

Two paths give one token per row of a batch of logits (`sample_batch`):
- CPU (and any non-CUDA device): `sample_token` row by row, as it always was.
- CUDA: the whole batch at once on the GPU (`sample_rows`) with one device-to-host read of the
  chosen ids per step. Greedy rows take an argmax. Sampled rows sort once, apply top-k and top-p
  as masks over the sorted row, and pick by inverse CDF with one uniform number per row drawn from
  the sequence's own CPU generator, so a seeded sequence still samples the same tokens alone or in
  a batch (though not the same tokens as the CPU path, which draws through torch.multinomial).
"""

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


def _keep_mask_sorted(
    sorted_logits: torch.Tensor, top_k: torch.Tensor, top_p: torch.Tensor, use_k: bool, use_p: bool
) -> torch.Tensor:
    """Which entries of rows sorted in descending order survive top-k and top-p (same rule as
    `sample_token`: top-k keeps every logit >= the k-th largest; top-p removes the tokens whose mass,
    together with every smaller token's, is <= 1 - top_p, never the largest token)."""
    b, v = sorted_logits.shape
    keep = torch.ones_like(sorted_logits, dtype=torch.bool)
    if use_k:
        k_on = (top_k > 0) & (top_k < v)
        kth = sorted_logits.gather(1, (top_k.clamp(1, v) - 1)[:, None])  # [B, 1]
        keep &= ~k_on[:, None] | (sorted_logits >= kth)
    if use_p:
        p_on = top_p < 1.0
        masked = sorted_logits.masked_fill(~keep, float("-inf"))
        probs = torch.softmax(masked, -1)
        # mass of this token and every smaller one = 1 - (mass of the larger ones)
        tail = 1.0 - (torch.cumsum(probs, -1) - probs)
        drop = (tail <= (1 - top_p)[:, None]) & p_on[:, None]
        drop[:, 0] = False
        keep &= ~drop
    return keep


def sample_rows(
    logits: torch.Tensor,
    params_list: list[SamplingParams],
    seen_list: list[list[int]],
    generators: list[torch.Generator | None],
) -> list[int]:
    """One token per row of float32 logits [B, V], batched on logits' device (no per-row host
    round trip: one read of the B chosen ids at the end)."""
    b = logits.shape[0]
    dev = logits.device
    if any(p.repetition_penalty != 1.0 for p in params_list):
        logits = logits.clone()
        for i, (p, seen) in enumerate(zip(params_list, seen_list, strict=True)):
            if p.repetition_penalty != 1.0:
                logits[i] = apply_repetition_penalty(logits[i], seen, p.repetition_penalty)
    greedy = [p.greedy for p in params_list]
    choice = torch.argmax(logits, -1)
    if not all(greedy):
        rows = [i for i in range(b) if not greedy[i]]
        sub = logits[rows] if len(rows) < b else logits
        temp = torch.tensor([params_list[i].temperature for i in rows], dtype=torch.float32)
        top_k = torch.tensor([params_list[i].top_k for i in rows], dtype=torch.long)
        top_p = torch.tensor([params_list[i].top_p for i in rows], dtype=torch.float32)
        u = torch.stack([torch.rand((), generator=generators[i]) for i in rows]).to(dev)
        scaled = sub / temp.to(dev)[:, None]
        sorted_logits, order = torch.sort(scaled, dim=-1, descending=True)
        v = logits.shape[-1]
        use_k = any(0 < params_list[i].top_k < v for i in rows)
        use_p = any(params_list[i].top_p < 1.0 for i in rows)
        keep = _keep_mask_sorted(sorted_logits, top_k.to(dev), top_p.to(dev), use_k, use_p)
        probs = torch.softmax(sorted_logits.masked_fill(~keep, float("-inf")), -1)
        cdf = torch.cumsum(probs, -1)
        # first position whose CDF exceeds u * total (total ~ 1; scaling keeps it inside the kept set)
        pick = torch.searchsorted(cdf, (u * cdf[:, -1])[:, None].contiguous(), right=True)
        pick = torch.minimum(pick, keep.sum(-1, keepdim=True) - 1)
        tok = order.gather(1, pick)[:, 0]
        idx = torch.tensor(rows, dtype=torch.long, device=dev)
        choice = choice.index_copy(0, idx, tok)
    return [int(t) for t in choice.tolist()]


def sample_batch(
    logits: torch.Tensor,
    params_list: list[SamplingParams],
    seen_list: list[list[int]],
    generators: list[torch.Generator | None],
) -> list[int]:
    """One token per row of float32 logits [B, V]: on CUDA batched on the GPU (`sample_rows`),
    elsewhere `sample_token` row by row (the CPU results are exactly those of `sample_token`)."""
    if logits.is_cuda:
        return sample_rows(logits, params_list, seen_list, generators)
    return [
        sample_token(logits[i], p, seen, g)
        for i, (p, seen, g) in enumerate(zip(params_list, seen_list, generators, strict=True))
    ]
