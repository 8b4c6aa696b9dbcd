"""Attribution: the attention mass that an answer puts on character spans of its prompt.

For every answer token take the query of the position that predicts it (the position just before
it), and at each global-attention layer (sliding-window layers only see nearby text, so they are
left out; in models without sliding layers every layer is global) its attention probabilities over
the prompt tokens, p = exp(scale * q.k - lse) with the backend's log-sum-exp. Aggregation: mean
over query heads, then mean over those layers (`attention_mass`), then summed over the prompt
tokens that overlap a span (a token counts for every span it overlaps) and averaged over answer
tokens (`attribute_spans`). `mass` is that fraction of all attention (the rest goes to other text,
BOS and the answer itself); `share` renormalises the masses over the given spans so they sum to 1.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from engine.kv.paged_cache import PagedKVCache
from engine.model.config import ModelConfig
from engine.runner.forward_context import Capture


@dataclass
class SpanAttribution:
    char_start: int
    char_end: int
    token_start: int  # first prompt token overlapping the span
    token_end: int  # one past the last
    mass: float  # mean attention the answer's tokens put on the span (fraction of all their attention)
    share: float  # mass / sum of the masses of all given spans


@dataclass
class AttributionOutput:
    spans: list[SpanAttribution]
    answer_token_ids: list[int]
    layers: list[int]  # the layers averaged over
    per_token: torch.Tensor = field(repr=False)  # [answer tokens, spans]: mass of each answer token


def attention_mass(config: ModelConfig, kv: PagedKVCache, tables: list[list[int]], captures: list[Capture],
                   layers: list[int], prompt_len: int, answer_len: int) -> torch.Tensor:
    """[answer tokens, prompt tokens] attention probability of each answer token's predicting
    position on each prompt token, mean over heads and `layers`; K read from the cache through the
    sequence's block `tables`, queries and log-sum-exps from `captures` (in prefill order)."""
    token_mass = torch.zeros(answer_len, prompt_len)
    for layer in layers:
        q = torch.cat([c.q[layer] for c in captures])[:answer_len]  # [A, H, D]
        lse = torch.cat([c.lse[layer] for c in captures])[:answer_len]  # [A, H]
        gi, k_cache, _ = kv.layer_cache(layer)
        table = torch.tensor(tables[gi], dtype=torch.long, device=k_cache.device)
        bs = k_cache.shape[1]
        k = k_cache.index_select(0, table[: (prompt_len + bs - 1) // bs]).flatten(0, 1)[:prompt_len]  # [P, KVH, D]
        a, h, d = q.shape
        kvh = k.shape[1]
        qg = q.float().reshape(a, kvh, h // kvh, d)  # head i reads kv head i // (h // kvh)
        scores = torch.einsum("akgd,pkd->akgp", qg, k.float()).reshape(a, h, prompt_len)
        scores = scores * config.attn_scale
        if config.attn_softcap is not None:
            cap = config.attn_softcap
            scores = torch.tanh(scores / cap) * cap
        probs = torch.exp(scores - lse.float()[..., None])  # [A, H, P]
        token_mass += probs.mean(1).cpu()
    token_mass /= len(layers)
    return token_mass


def attribute_spans(token_mass: torch.Tensor, offsets: list[tuple[int, int]], spans: list[tuple[int, int]],
                    answer_ids: list[int], layers: list[int]) -> AttributionOutput:
    """Per-span mass and share from `token_mass` [answer tokens, prompt tokens]; `offsets` are the
    prompt tokens' character spans."""
    results, cols = [], []
    for a, b in spans:
        toks = [i for i, (s, e) in enumerate(offsets) if e > s and s < b and e > a]
        t0, t1 = (toks[0], toks[-1] + 1) if toks else (0, 0)
        col = token_mass[:, toks].sum(1) if toks else torch.zeros(len(answer_ids))
        cols.append(col)
        results.append(SpanAttribution(a, b, t0, t1, float(col.mean()), 0.0))
    total = sum(r.mass for r in results)
    for r in results:
        r.share = r.mass / total if total > 0 else 0.0
    per_token = torch.stack(cols, 1) if cols else torch.zeros(len(answer_ids), 0)
    return AttributionOutput(results, answer_ids, layers, per_token)
