"""The model runner: turns scheduled work (prefill chunks and decode steps of sequences) into one
flat batch, allocates cache slots, builds the ForwardContext and runs the model."""

from __future__ import annotations

import contextlib
from collections.abc import Callable

import torch

from engine.attention.backend import AttentionBackend
from engine.core.sequence import Sequence
from engine.kv.paged_cache import PagedKVCache
from engine.model.decoder import CausalLM
from engine.runner.cuda_graph import len_bucket
from engine.runner.forward_context import Capture, ForwardContext, PrefillItem
from longdoc_kernels import dispatch


class ModelRunner:
    """on_computed(seq): called after every forward for each sequence it advanced (the prefix cache
    indexes the sequence's newly completed blocks), before sliding windows release blocks."""

    def __init__(self, model: CausalLM, cache: PagedKVCache, backend: AttentionBackend, device: torch.device,
                 on_computed: Callable[[Sequence], None] | None = None) -> None:
        self.model, self.cache, self.backend, self.device = model, cache, backend, device
        self.dynamic_rope = any(r.rope_type == "dynamic" for r in model.config.layer_ropes)
        self.graphs = None  # CudaGraphRunner for decode steps (engine/runner/cuda_graph.py), set by attach_graphs
        self.on_computed = on_computed

    @torch.inference_mode()
    def forward(
        self, prefills: list[tuple[Sequence, int]], decodes: list[Sequence], capture: Capture | None = None
    ) -> torch.Tensor:
        """Run prefill chunks (sequence, n new prompt tokens) then one decode token per sequence in
        `decodes`; return the final hidden states of every row [T, hidden] (prefill rows first)."""
        # --- CUDA graph hook (engine/runner/cuda_graph.py): a decode-only step replays a captured graph;
        # run() returns None (having done nothing) for any step it does not cover.
        if self.graphs is not None and not prefills and capture is None:
            hidden = self.graphs.run(decodes)
            if hidden is not None:
                return hidden
        # --- end of hook
        dev = self.device
        ids: list[int] = []
        pos: list[int] = []
        rope_lens: list[int] = []
        groups = len(self.cache.groups)
        slots: list[list[torch.Tensor]] = [[] for _ in range(groups)]
        items: list[PrefillItem] = []
        for seq, n in prefills:
            start = seq.num_cached
            toks = seq.all_ids[start : start + n]
            items.append(PrefillItem(len(ids), n, start, []))
            ids += toks
            pos += range(start, start + n)
            rope_lens += [seq.rope_seq_len] * n
            for g, s in enumerate(self.cache.allocate_slots(seq.tables, start, n)):
                slots[g].append(s)
            items[-1].warm = [any(e <= -2 for e in t) for t in seq.tables]
        # every prefill chunk's block table of a group as a row of one padded table: one copy to the
        # device per group, the items' tables are views of it
        pre_tables = None
        if prefills:
            pre_tables = []
            for g in range(groups):
                width = max(1, max(len(s.tables[g]) for s, _ in prefills))
                t = torch.full((len(prefills), width), -1, dtype=torch.long)
                for i, (s, _) in enumerate(prefills):
                    t[i, : len(s.tables[g])] = torch.tensor(s.tables[g], dtype=torch.long)
                pre_tables.append(t.to(dev))
            for i, (s, _) in enumerate(prefills):
                items[i].block_tables = [pre_tables[g][i, : len(s.tables[g])] for g in range(groups)]
        decode_start = len(ids)
        for seq in decodes:
            p = seq.num_tokens - 1
            assert seq.num_cached == p, "a decoding sequence has exactly one uncached token"
            ids.append(seq.all_ids[-1])
            pos.append(p)
            rope_lens.append(seq.rope_seq_len)
            for g, s in enumerate(self.cache.allocate_slots(seq.tables, p, 1)):
                slots[g].append(s)
        dec_tables = None
        dec_lens = None
        if decodes:
            dec_tables = []
            for g in range(groups):
                width = max(len(s.tables[g]) for s in decodes)
                t = torch.full((len(decodes), width), -1, dtype=torch.long)
                for i, s in enumerate(decodes):
                    t[i, : len(s.tables[g])] = torch.tensor(s.tables[g], dtype=torch.long)
                dec_tables.append(t.to(dev))
            dec_lens = torch.tensor([s.num_tokens for s in decodes], dtype=torch.long, device=dev)
        ctx = ForwardContext(
            cache=self.cache,
            backend=self.backend,
            slot_mappings=[torch.cat(s).to(dev) for s in slots],
            prefills=items,
            prefill_tables=pre_tables,
            decode_start=decode_start,
            decode_block_tables=dec_tables,
            decode_kv_lens=dec_lens,
            rope_seq_lens=torch.tensor(rope_lens, device=dev) if self.dynamic_rope else None,
            capture=capture,
        )
        # decode launches are sized for the step's context bucket, as a graph replay's are: an eager
        # step and a replay of the same sequences run the same context splits (the same rounding),
        # and the eager step reads no sequence length back from the device
        bucket = len_bucket(max(s.num_tokens for s in decodes), self.cache.max_model_len) if decodes else None
        with dispatch.static_max_kv_len(bucket) if bucket else contextlib.nullcontext():
            hidden = self.model(
                torch.tensor(ids, dtype=torch.long, device=dev), torch.tensor(pos, dtype=torch.long, device=dev), ctx
            )
        for seq, n in prefills:
            seq.num_cached += n
        for seq in decodes:
            seq.num_cached += 1
        self.after_forward([s for s, _ in prefills] + list(decodes))
        return hidden

    def after_forward(self, seqs: list[Sequence]) -> None:
        """Tell the prefix cache which blocks are complete (`on_computed`), then free the blocks
        the sliding windows no longer see (in that order: a sliding block must be indexed before it
        is freed, so a later request can take it back)."""
        for seq in seqs:
            if self.on_computed is not None:
                self.on_computed(seq)
            self.cache.release_out_of_window(seq.tables, seq.num_cached)
