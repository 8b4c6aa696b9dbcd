"""The model runner: turns scheduled work (prefill chunks and decode steps of sequences) into one
flat batch, allocates cache slots, builds the ForwardContext and runs the model."""

from __future__ import annotations

import array
import contextlib
from collections.abc import Callable

import torch

from engine.attention.backend import AttentionBackend
from engine.core.sequence import Sequence
from engine.kv.paged_cache import PagedKVCache
from engine.model.decoder import CausalLM
from engine.runner.cuda_graph import len_bucket
from engine.runner.forward_context import Capture, ForwardContext, PrefillItem, StepInputs
from longdoc_kernels import dispatch


def long_tensor(values: list[int]) -> torch.Tensor:
    """torch.tensor(values, dtype=torch.long) through an array's buffer: a 32K-token chunk's ids in
    ~0.5 ms instead of ~1.8 (the step's host work before its first launch is serial with the GPU)."""
    if len(values) < 64:
        return torch.tensor(values, dtype=torch.long)
    return torch.frombuffer(array.array("q", values), dtype=torch.long)


class ModelRunner:
    """on_computed(seq): called after every forward for each sequence it advanced (the prefix cache
    indexes the sequence's newly completed blocks), before sliding windows release blocks."""

    def __init__(self, model: CausalLM, cache: PagedKVCache, backend: AttentionBackend, device: torch.device,
                 on_computed: Callable[[Sequence], None] | None = None) -> None:
        self.model, self.cache, self.backend, self.device = model, cache, backend, device
        self.dynamic_rope = any(r.rope_type == "dynamic" for r in model.config.layer_ropes)
        self.graphs = None  # CudaGraphRunner for decode steps (engine/runner/cuda_graph.py), set by attach_graphs
        self.on_computed = on_computed

    @property
    def exact_rows(self) -> int | None:
        """On the CPU, the row count below which a step's rows are each computed exactly as a lone
        decode step computes them (the int8 layers' kernels are row-independent up to the bfloat16
        GEMM threshold, engine/model/quant.py; the CPU attention backend computes chunks under it
        row by row): the cap on a step of decodes and draft verifications
        (engine/core/speculative.py). None: no such bound (CUDA)."""
        if self.device.type != "cpu":
            return None
        from engine.model.quant import GEMM_ROWS

        return GEMM_ROWS

    @torch.inference_mode()
    def forward(
        self, prefills: list[tuple[Sequence, int]], decodes: list[Sequence], capture: Capture | None = None,
        verify: list[tuple[Sequence, int]] = (),
    ) -> torch.Tensor:
        """Run prefill chunks (sequence, n new prompt tokens) then one decode token per sequence in
        `decodes`; return the final hidden states of every row [T, hidden] (prefill rows first).
        verify: (sequence, n) chunks of a decoding sequence's uncached token and n - 1 draft tokens
        (engine/core/speculative.py), laid out after the prefills and computed like them, but not
        advanced: the caller sets how many of them stay cached and then calls `after_forward`."""
        # --- CUDA graph hook (engine/runner/cuda_graph.py): a decode-only step replays a captured graph;
        # run() returns None (having done nothing) for any step it does not cover.
        if self.graphs is not None and not prefills and not verify and capture is None:
            hidden = self.graphs.run(decodes)
            if hidden is not None:
                return hidden
        # --- end of hook
        hidden = self.execute(self.prepare(list(prefills) + list(verify), decodes), capture)
        self.advance(prefills, decodes)
        return hidden

    def prepare(self, prefills: list[tuple[Sequence, int]], decodes: list[Sequence]) -> StepInputs:
        """The step as data on the host: token ids, positions, slot mappings (allocating the blocks
        the new tokens need), block tables and lengths. What `execute` runs, and what a tensor-
        parallel driver sends to the other ranks (engine/parallel)."""
        ids: list[int] = []
        pos: list[torch.Tensor] = []  # a prefill chunk's positions as one arange (a 32K-token chunk: 32K ints otherwise)
        dec_pos: list[int] = []
        rope_lens: list[torch.Tensor] = []
        groups = len(self.cache.groups)
        slots: list[list[torch.Tensor]] = [[] for _ in range(groups)]
        items: list[tuple[int, int, int, list[bool], list[int]]] = []
        for seq, n in prefills:
            start = seq.num_cached
            toks = seq.all_ids[start : start + n]
            row = len(ids)
            ids += toks
            pos.append(torch.arange(start, start + n))
            if self.dynamic_rope:
                rope_lens.append(torch.full((n,), seq.rope_seq_len))
            for g, s in enumerate(self.cache.allocate_slots(seq.tables, start, n)):
                slots[g].append(s)
            items.append((row, n, start, [any(e <= -2 for e in t) for t in seq.tables], [len(t) for t in seq.tables]))
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
                pre_tables.append(t)
        decode_start = len(ids)
        for seq in decodes:
            p = seq.num_tokens - 1
            assert seq.num_cached == p, "a decoding sequence has exactly one uncached token"
            ids.append(seq.all_ids[-1])
            dec_pos.append(p)
            if self.dynamic_rope:
                rope_lens.append(torch.tensor([seq.rope_seq_len]))
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
                dec_tables.append(t)
            dec_lens = torch.tensor([s.num_tokens for s in decodes], dtype=torch.long)
        # decode launches are sized for the step's context bucket, as a graph replay's are: an eager
        # step and a replay of the same sequences run the same context splits (the same rounding),
        # and the eager step reads no sequence length back from the device
        bucket = len_bucket(max(s.num_tokens for s in decodes), self.cache.max_model_len) if decodes else None
        return StepInputs(
            ids=long_tensor(ids),
            positions=torch.cat(pos + [torch.tensor(dec_pos, dtype=torch.long)]),
            rope_seq_lens=torch.cat(rope_lens) if self.dynamic_rope and rope_lens else None,
            slot_mappings=[torch.cat(s) for s in slots],
            prefills=items,
            prefill_tables=pre_tables,
            decode_start=decode_start,
            decode_tables=dec_tables,
            decode_lens=dec_lens,
            bucket=bucket,
            seq_ids=[s.seq_id for s, _ in prefills] + [s.seq_id for s in decodes],
        )

    @torch.inference_mode()
    def execute(self, step: StepInputs, capture: Capture | None = None) -> torch.Tensor:
        """Run a prepared step on this runner's model and cache: copy its host data to the device
        (one copy per tensor), build the ForwardContext, return the hidden states [T, hidden]."""
        dev = self.device
        pre_tables = [t.to(dev) for t in step.prefill_tables] if step.prefill_tables is not None else None
        items = []
        for i, (row, n, start, warm, widths) in enumerate(step.prefills):  # tables: views of the padded rows
            tables = [pre_tables[g][i, :w] for g, w in enumerate(widths)] if pre_tables is not None else []
            items.append(PrefillItem(row, n, start, tables, list(warm)))
        ctx = ForwardContext(
            cache=self.cache,
            backend=self.backend,
            slot_mappings=[s.to(dev) for s in step.slot_mappings],
            prefills=items,
            prefill_tables=pre_tables,
            decode_start=step.decode_start,
            decode_block_tables=[t.to(dev) for t in step.decode_tables] if step.decode_tables is not None else None,
            decode_kv_lens=step.decode_lens.to(dev) if step.decode_lens is not None else None,
            rope_seq_lens=step.rope_seq_lens.to(dev) if step.rope_seq_lens is not None else None,
            capture=capture,
        )
        with dispatch.static_max_kv_len(step.bucket) if step.bucket else contextlib.nullcontext():
            return self.model(step.ids.to(dev), step.positions.to(dev), ctx)

    def advance(self, prefills: list[tuple[Sequence, int]], decodes: list[Sequence]) -> None:
        """After a forward: the sequences' new tokens are cached; then `after_forward`."""
        for seq, n in prefills:
            seq.num_cached += n
        for seq in decodes:
            seq.num_cached += 1
        self.after_forward([s for s, _ in prefills] + list(decodes))

    def after_forward(self, seqs: list[Sequence]) -> None:
        """Tell the prefix cache which blocks are complete (`on_computed`), then free the blocks
        the sliding windows no longer see (in that order: a sliding block must be indexed before it
        is freed, so a later request can take it back)."""
        for seq in seqs:
            if self.on_computed is not None:
                self.on_computed(seq)
            self.cache.release_out_of_window(seq.tables, seq.num_cached)
