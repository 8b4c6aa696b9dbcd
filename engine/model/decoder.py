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
        if self.qembed is not None:
            x = self.qembed.rows(input_ids, self.model.norm.weight.dtype)
        else:
            x = self.model.embed_tokens(input_ids)
        if self.config.embed_scale is not None:
            x = x * torch.tensor(self.config.embed_scale, dtype=x.dtype)
        tables = [r.cos_sin(positions, x.dtype, ctx.rope_seq_lens) for r in self.ropes]
        for i, layer in enumerate(self.model.layers):
            cos, sin = tables[self.layer_rope[i]]
            x = layer(x, cos, sin, ctx)
        return self.model.norm(x)

    def greedy(self, hidden: torch.Tensor) -> list[int] | None:
        """The argmax token of each row of hidden [N, hidden] (what `logits` then argmax gives), or
        None when this model has no GreedyHead (float or GPU weights) or soft-caps its logits (a
        saturated cap can tie logits that differ, and torch.argmax then picks the lower index)."""
        if self.greedy_head is None or self.config.final_softcap is not None:
            return None
        return self.greedy_head.argmax(hidden)

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """Vocabulary logits (float32) of hidden rows [N, hidden]."""
        logits = linear(hidden, self.qhead if self.qhead is not None else self.lm_head_weight)
        cap = self.config.final_softcap
        if cap is not None:
            logits = torch.tanh(logits / cap) * cap
        return logits.float()
