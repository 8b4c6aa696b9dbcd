"""The decoder-only causal LM every family runs on: embeddings (optionally scaled), decoder layers
with per-layer RoPE, final norm, LM head (tied or not, optional soft-capping).

`forward` takes a flat batch of tokens (the new tokens of every scheduled sequence, prefill chunks
first, then one token per decoding sequence) and a `ForwardContext` describing where each
sequence's K/V lives in the paged cache; it returns hidden states, and `logits` maps selected rows
to vocabulary logits (prefill keeps only the rows it needs).
"""

from __future__ import annotations

import torch
from torch import nn

from engine.model.config import ModelConfig
from engine.model.layers import DecoderLayer, RMSNorm
from engine.model.quant import GreedyHead, Int8Weight, linear
from engine.model.rope import RotaryEmbedding
from engine.runner.forward_context import ForwardContext


class Body(nn.Module):
    """`model.*` in HF naming: embed_tokens, layers, norm."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size)
        self.layers = nn.ModuleList([DecoderLayer(config, i) for i in range(config.num_layers)])
        self.norm = RMSNorm(config.hidden_size, config.rms_norm_eps, config.gemma_norm)


class CausalLM(nn.Module):
    """The whole model; build under `torch.device('meta')` and load weights with assign=True."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.config = config
        self.model = Body(config)
        if not config.tie_word_embeddings:
            self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)
        self.qembed: Int8Weight | None = None  # int8 embedding table (and tied output layer), quantize_embeddings()
        self.qhead: Int8Weight | None = None  # int8 output layer
        self.greedy_head: GreedyHead | None = None  # exact argmax of qhead at about half the bytes (CPU)
        # tensor parallelism (engine/parallel): this rank's TPGroup; embed_tokens / lm_head then hold
        # rows vocab_lo..vocab_lo+config.vocab_size of the full vocabulary (config is the rank's)
        self.tp = None
        self.vocab_lo = 0
        self.ropes: list[RotaryEmbedding] = []
        self.layer_rope: list[int] = []

    def setup_rope(self, device: torch.device) -> None:
        """Build one RotaryEmbedding per distinct RoPE configuration (Gemma 3: local and global)."""
        c = self.config
        distinct: dict = {}
        self.ropes, self.layer_rope = [], []
        for rope in c.layer_ropes:
            if rope not in distinct:
                distinct[rope] = len(self.ropes)
                self.ropes.append(RotaryEmbedding(rope, c.head_dim, c.max_position_embeddings, device))
            self.layer_rope.append(distinct[rope])

    def quantize_embeddings(self) -> None:
        """Keep the embedding table (and the output layer: the same table when tied) as int8 rows
        with per-row scales; the float tables are dropped (engine/model/quant.py)."""
        self.qembed = Int8Weight(self.model.embed_tokens.weight)
        self.qhead = self.qembed if self.config.tie_word_embeddings else Int8Weight(self.lm_head.weight)
        self.model.embed_tokens.weight = None
        if not self.config.tie_word_embeddings:
            self.lm_head.weight = None
        try:
            self.greedy_head = GreedyHead(self.qhead) if self.qhead.shape[1] % 32 == 0 else None
        except (RuntimeError, AttributeError, NotImplementedError):  # a torch without the CPU int4 kernel
            self.greedy_head = None

    @property
    def lm_head_weight(self) -> torch.Tensor:
        return self.model.embed_tokens.weight if self.config.tie_word_embeddings else self.lm_head.weight

    def forward(self, input_ids: torch.Tensor, positions: torch.Tensor, ctx: ForwardContext) -> torch.Tensor:
        """Hidden states [T, hidden] after the final norm, for the flat batch `input_ids` [T]."""
        x = self.embed(input_ids)
        if self.config.embed_scale is not None:
            x = x * torch.tensor(self.config.embed_scale, dtype=x.dtype)
        tables = [r.cos_sin(positions, x.dtype, ctx.rope_seq_lens) for r in self.ropes]
        for i, layer in enumerate(self.model.layers):
            cos, sin = tables[self.layer_rope[i]]
            x = layer(x, cos, sin, ctx)
        return self.model.norm(x)

    def embed(self, input_ids: torch.Tensor) -> torch.Tensor:
        """Embedding rows of `input_ids` (unscaled). Tensor-parallel: each rank looks up the ids of
        its vocabulary slice (zeros for the others) and an all-reduce sums the ranks' rows."""
        ids = input_ids
        if self.tp is not None:
            local = ids - self.vocab_lo
            mine = (local >= 0) & (local < self.config.vocab_size)
            ids = torch.where(mine, local, torch.zeros_like(local))
        if self.qembed is not None:
            x = self.qembed.rows(ids, self.model.norm.weight.dtype)
        else:
            x = self.model.embed_tokens(ids)
        if self.tp is not None:
            x = self.tp.all_reduce(x * mine.unsqueeze(-1).to(x.dtype))
        return x

    def greedy(self, hidden: torch.Tensor) -> list[int] | None:
        """The argmax token of each row of hidden [N, hidden] (what `logits` then argmax gives), or
        None when this model has no GreedyHead (float or GPU weights) or soft-caps its logits (a
        saturated cap can tie logits that differ, and torch.argmax then picks the lower index)."""
        if self.greedy_head is None or self.config.final_softcap is not None or self.tp is not None:
            return None
        return self.greedy_head.argmax(hidden)

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """Vocabulary logits (float32) of hidden rows [N, hidden]. Tensor-parallel: rank 0 first
        calls the other ranks in (they run this too, on the same rows), each computes its vocabulary
        slice and an all-gather joins them."""
        if self.tp is not None:
            self.tp.call_in("logits", hidden)
        logits = linear(hidden, self.qhead if self.qhead is not None else self.lm_head_weight)
        if self.tp is not None:
            logits = self.tp.gather_vocab(logits)
        cap = self.config.final_softcap
        if cap is not None:
            logits = torch.tanh(logits / cap) * cap
        return logits.float()
