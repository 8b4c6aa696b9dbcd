"""The scheduler: continuous batching with chunked prefill mixed into decode steps, admission
control against a KV-cache watermark, and preemption by swap (to host memory) or by recompute.

Every step builds one batch for `ModelRunner.forward`:
1. every running sequence that is decoding gets its next token (a slot is made for it first; when
   the cache has no free block, the most recently admitted sequence is preempted);
2. sequences still prefilling get their next chunk, while the step's token budget lasts. Chunks
   are cut on the global grid 0, C, 2C, ... (C = max_prefill_chunk) and at the prompt's tail (the
   last block boundary before its last token, `prompt_tail`), and never split by the budget, so a
   prompt is computed in the same pieces whatever else shares the step — the basis of the prefix
   cache's bit-exact reuse, of a shared prefix at grid points and of a repeated prompt up to its
   tail;
3. swapped-out sequences come back first, then waiting ones are admitted, in arrival order, while
   the projected use of every block pool (blocks in use + the newcomer's prompt blocks after its
   prefix-cache hit + one block of growth per running sequence) stays under `watermark` of the pool.

Preemption frees a victim's device blocks. "swap" copies them to host memory first and copies
them back on resume (exact: the same tokens as an uninterrupted run); "recompute" drops them and
prefills prompt + generated tokens again on resume (blocks that are still cached-free come back
through the prefix cache instead of being recomputed). Swap falls back to recompute when the
host swap budget is full.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from engine.config import DEFAULT_PREFILL_CHUNK, CacheConfig, SchedulerConfig
from engine.core.sequence import Sequence
from engine.errors import CacheFullError
from engine.kv.paged_cache import PagedKVCache, default_kv_budget, free_memory_bytes
from engine.model.config import ModelConfig

log = logging.getLogger(__name__)


@dataclass
class SchedulerOutput:
    """One step's plan: prefill chunks (sequence, prompt tokens to compute now) and the sequences
    that decode one token each, in the order the model runner lays out their rows."""

    prefills: list[tuple[Sequence, int]] = field(default_factory=list)
    decodes: list[Sequence] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not self.prefills and not self.decodes


@dataclass
class SchedulerCounters:
    steps: int = 0
    preempted_swap: int = 0
    preempted_recompute: int = 0
    swapped_in: int = 0
    swap_bytes_out: int = 0
    admitted: int = 0
    queued_steps: int = 0  # steps that ended with requests still waiting for memory

    def to_dict(self) -> dict:
        return dict(self.__dict__)


class Scheduler:
    """One step's batch at a time over `kv` (see the module docstring). prefix: the PrefixCache
    (None: no prefix caching). on_place(seq): writes a stored document's KV into `seq` when its
    cached tokens reach the document's offset."""

    def __init__(self, kv: PagedKVCache, config: SchedulerConfig, prefix=None,
                 on_place: Callable[[Sequence], None] | None = None) -> None:
        if config.preemption not in ("swap", "recompute"):
            raise ValueError(f"preemption must be 'swap' or 'recompute', not {config.preemption!r}")
        self.kv = kv
        self.cfg = config
        self.max_num_seqs = max_num_seqs = config.max_num_seqs
        self.chunk = chunk = config.prefill_chunk
        on_gpu = kv.device.type == "cuda"
        self.budget = config.max_num_batched_tokens or (
            max(chunk, config.gpu_step_tokens if on_gpu else 0) + max_num_seqs
        )
        if self.budget < chunk:
            raise ValueError(f"max_num_batched_tokens ({self.budget}) must be >= max_prefill_chunk ({chunk})")
        self.prefix = prefix  # PrefixCache or None
        self.prefix_caching = config.prefix_caching and prefix is not None  # a benchmark may switch it off
        self.on_place = on_place or (lambda s: None)  # places a stored document (EngineCore.place_document)
        self.waiting: deque[Sequence] = deque()
        self.running: list[Sequence] = []
        self.swapped: deque[Sequence] = deque()
        self.swap_bytes = 0
        self.counters = SchedulerCounters()
        self._pending: list[int] = [0] * len(kv.groups)

    # ------------------------------------------------------------------ queues
    def add(self, seq: Sequence) -> None:
        self.waiting.append(seq)

    @property
    def has_work(self) -> bool:
        return bool(self.waiting or self.running or self.swapped)

    def finish(self, seq: Sequence) -> None:
        if seq in self.running:
            self.running.remove(seq)
        self._drop(seq)

    def abort(self, seq: Sequence) -> None:
        """Drop an unfinished request wherever it is (waiting, running or swapped out)."""
        if seq in self.running:
            self.running.remove(seq)
            self._drop(seq)
        elif seq in self.swapped:
            self.swapped.remove(seq)
            self._release_swap(seq)
        elif seq in self.waiting:
            self.waiting.remove(seq)

    def abort_all(self) -> None:
        for s in list(self.running):
            self._drop(s)
        for s in self.swapped:
            self._release_swap(s)
        self.running.clear()
        self.swapped.clear()
        self.waiting.clear()

    def _drop(self, seq: Sequence) -> None:
        self.kv.free(seq.tables)
        if self.prefix is not None:
            self.prefix.release(seq)

    # ------------------------------------------------------------------ block accounting
    def _new_blocks(self, seq: Sequence, upto: int) -> list[int]:
        """Blocks each group must allocate for `seq` to hold tokens 0..upto-1."""
        bs = self.kv.block_size
        end = (upto + bs - 1) // bs
        return [max(0, end - len(t)) for t in seq.tables]

    def _fits_now(self, need: list[int]) -> bool:
        """Whether `need` blocks per group are free, after what this step already scheduled."""
        return all(n + p <= g.allocator.num_free for n, p, g in zip(need, self._pending, self.kv.groups, strict=True))

    def free_after_step(self) -> list[int]:
        """Blocks per group still free once the scheduled step has allocated what it reserved."""
        return [g.allocator.num_free - p for p, g in zip(self._pending, self.kv.groups, strict=True)]

    def _reserve(self, need: list[int]) -> None:
        self._pending = [p + n for p, n in zip(self._pending, need, strict=True)]

    def _committed(self) -> list[int]:
        """Blocks per group that running sequences still have to allocate for their prompts."""
        out = [0] * len(self.kv.groups)
        for s in self.running:
            if s.prefilling:
                peak = self.kv.blocks_needed(s.prefill_len)
                out = [o + max(0, n - sum(1 for b in t if b >= 0))
                       for o, n, t in zip(out, peak, s.tables, strict=True)]
        return out

    def _prompt_need(self, seq: Sequence) -> list[int]:
        """Blocks per group the sequence's whole prefill will hold at its peak (before any hit)."""
        return self.kv.blocks_needed(seq.prefill_len)

    def _under_watermark(self, need: list[int]) -> bool:
        """Projected use (in use + scheduled this step + running prompts' remaining blocks + one
        block of growth per running sequence + `need`) within the watermark of every pool."""
        growth = len(self.running)
        for n, p, c, g in zip(need, self._pending, self._committed(), self.kv.groups, strict=True):
            if g.allocator.num_used + p + c + n + growth > self.cfg.watermark * g.num_blocks:
                return False
        return True

    def _chunk_len(self, s: Sequence) -> int:
        """The next prefill chunk: up to the next grid boundary, the prompt's end, or the position
        where a stored document is to be placed (which happens first, see `on_place`)."""
        if s.doc is not None and s.num_cached == s.doc[0]:
            self.on_place(s)
        return next_prefill_end(s, self.chunk, self.kv.block_size) - s.num_cached

    # ------------------------------------------------------------------ one step
    def schedule(self) -> SchedulerOutput:
        self.counters.steps += 1
        self._pending = [0] * len(self.kv.groups)
        self._relieved = False  # pressure demotion runs at most once a step (nothing new to move after)
        batch = SchedulerOutput()
        budget = self.budget
        # 1. decodes, oldest first; preempt the newest when out of blocks
        for s in list(self.running):
            if s not in self.running or s.prefilling:
                continue
            while True:
                need = self._new_blocks(s, s.num_tokens)
                if self._fits_now(need) or (self._relieve() and self._fits_now(need)):
                    break
                victim = self._pick_victim(exclude=s)
                if victim is None:
                    self._preempt(s)
                    break
                self._preempt(victim)
            if s in self.running:
                batch.decodes.append(s)
                self._reserve(self._new_blocks(s, s.num_tokens))
                budget -= 1
        # 2. prefill chunks of admitted sequences, grid-aligned, whole chunks only
        for s in self.running:
            if not s.prefilling:
                continue
            n = self._chunk_len(s)
            if n == 0:  # the document filled the rest of the prompt
                continue
            if n > budget and (batch.prefills or batch.decodes):
                break
            need = self._new_blocks(s, s.num_cached + n)
            if not self._fits_now(need) and not (self._relieve() and self._fits_now(need)):
                if not batch.prefills and not batch.decodes and len(self.running) == 1:
                    raise CacheFullError(
                        f"KV cache too small to prefill {s.prefill_len} tokens; raise the cache memory budget"
                    )
                break
            batch.prefills.append((s, n))
            self._reserve(need)
            budget -= n
        # 3. resume swapped sequences, then admit waiting ones
        self._admit(batch)
        if self.waiting:
            self.counters.queued_steps += 1
        if batch.empty and self.has_work:
            s = self.waiting[0] if self.waiting else (self.swapped[0] if self.swapped else None)
            raise CacheFullError(
                "KV cache too small for a single request"
                + (f" of {s.prefill_len} tokens + {s.params.max_tokens} new tokens" if s is not None else "")
                + "; raise the cache memory budget or lower max_tokens"
            )
        return batch

    def _admit(self, batch: SchedulerOutput) -> None:
        while self.swapped and len(self.running) < self.max_num_seqs:
            s = self.swapped[0]
            need = [sum(1 for b in t if b >= 0) for t in s.swapped["tables"]]
            warm_ok = all(
                g.warm is None or sum(1 for b in t if b <= -2) <= g.warm.allocator.num_free
                for g, t in zip(self.kv.groups, s.swapped["tables"], strict=True)
            )
            if not (warm_ok and self._fits_now(need) and (self._under_watermark(need) or not self.running)):
                return  # swapped sequences keep priority over new ones
            self.swapped.popleft()
            self._swap_in(s)
            self.running.append(s)
            need = self._new_blocks(s, s.num_tokens)
            if not s.prefilling and self._fits_now(need):
                batch.decodes.append(s)
                self._reserve(need)
        budget_left = self.budget - sum(n for _, n in batch.prefills) - len(batch.decodes)
        while self.waiting and len(self.running) < self.max_num_seqs:
            s = self.waiting[0]
            need = self._prompt_need(s)
            if not self._under_watermark(need) and self.running:
                return
            s.tables = self.kv.new_tables()
            if self.prefix_caching:
                self.prefix.match_and_attach(s)  # a document request: its instructions only
            need = [max(0, n - sum(1 for b in t if b >= 0)) for n, t in zip(need, s.tables, strict=True)]
            if not self._fits_now(need) and self.running:
                self._drop(s)
                s.tables = self.kv.new_tables()
                s.num_cached = s.cached_tokens = 0
                return
            self.waiting.popleft()
            self.running.append(s)
            self.counters.admitted += 1
            if not s.prefilling:  # a recomputed sequence served whole from the prefix cache
                need = self._new_blocks(s, s.num_tokens)
                if self._fits_now(need):
                    batch.decodes.append(s)
                    self._reserve(need)
                continue
            n = self._chunk_len(s)
            if n == 0:
                continue
            need = self._new_blocks(s, s.num_cached + n)
            if (n <= budget_left or batch.empty) and self._fits_now(need):
                batch.prefills.append((s, n))
                self._reserve(need)
                budget_left -= n

    def _relieve(self) -> bool:
        """Under block pressure with a demotion watermark: demote every running sequence's
        demotable blocks (the watermark ignored) before anything is preempted; True if any moved."""
        if self._relieved or self.kv.demote_watermark is None or not self.kv.has_warm():
            return False
        self._relieved = True
        return sum(self.kv.demote(s.tables, s.num_cached, force=True) for s in self.running) > 0

    # ------------------------------------------------------------------ preemption
    def _pick_victim(self, exclude: Sequence) -> Sequence | None:
        """The most recently admitted sequence not yet scheduled in this step (those after
        `exclude`, which is being scheduled; the ones before it already hold their slots)."""
        later = self.running[self.running.index(exclude) + 1 :]
        return later[-1] if later else None

    def _preempt(self, seq: Sequence) -> None:
        self.running.remove(seq)
        seq.preemptions += 1
        # a sequence holding a placed document cannot be recomputed the normal way: always swapped
        if self.cfg.preemption == "swap" or seq.holds_placed_document:
            nbytes = self._swap_bytes(seq)
            if self.swap_bytes + nbytes <= self.cfg.swap_budget or seq.holds_placed_document:
                self._swap_out(seq, nbytes)
                self.swapped.appendleft(seq)
                self.counters.preempted_swap += 1
                return
        # recompute: drop the blocks; prefill prompt + output (all but the last token) on resume
        self._drop(seq)
        seq.tables = []
        seq.num_cached = 0
        seq.prefill_target = max(seq.num_tokens - 1, len(seq.prompt_ids)) if seq.output_ids else -1
        self.waiting.appendleft(seq)
        self.counters.preempted_recompute += 1
        log.info("preempted request %d by recompute (%d tokens)", seq.seq_id, seq.num_tokens)

    def _swap_bytes(self, seq: Sequence) -> int:
        total = 0
        for g, t in zip(self.kv.groups, seq.tables, strict=True):
            per = g.k[:, 0].numel() * g.k.element_size() * 2
            total += per * sum(1 for b in t if b >= 0)
            if g.warm is not None:
                per_warm = (g.warm.kq[:, 0].numel() + g.warm.kmin[:, 0].numel()) * 2 + g.warm.ks[:, 0].numel() * 8
                total += per_warm * sum(1 for b in t if b <= -2)
        return total

    def _swap_out(self, seq: Sequence, nbytes: int) -> None:
        """Copy the sequence's device blocks to host memory and free them."""
        saved = {"tables": [list(t) for t in seq.tables], "hot": [], "warm": []}
        for gi, t in enumerate(seq.tables):
            hot = [(j, b) for j, b in enumerate(t) if b >= 0]
            if hot:  # to pinned host memory on the copy stream (engine/kv/tier_copy.py)
                saved["hot"].append((gi, [j for j, _ in hot], self.kv.save_blocks(gi, "hot", [b for _, b in hot])))
            warm = [(j, b) for j, b in enumerate(t) if b <= -2]
            if warm:
                saved["warm"].append((gi, [j for j, _ in warm],
                                      self.kv.save_blocks(gi, "warm", [-b - 2 for _, b in warm])))
        self.kv.free(seq.tables)
        if self.prefix is not None:
            self.prefix.release(seq)
        seq.swapped = saved
        seq.swapped["bytes"] = nbytes
        self.swap_bytes += nbytes
        self.counters.swap_bytes_out += nbytes
        log.info("preempted request %d by swap (%d bytes)", seq.seq_id, nbytes)

    def _swap_in(self, seq: Sequence) -> None:
        saved = seq.swapped
        tables = [[-1] * len(t) for t in saved["tables"]]
        for gi, cols, payload in saved["hot"]:
            for j, b in zip(cols, self.kv.load_blocks(gi, "hot", payload), strict=True):
                tables[gi][j] = b
        for gi, cols, payload in saved["warm"]:
            for j, w in zip(cols, self.kv.load_blocks(gi, "warm", payload), strict=True):
                tables[gi][j] = -w - 2
        seq.tables = tables
        saved["hot"], saved["warm"] = [], []  # loaded: nothing left to drop
        self._release_swap(seq)
        if self.prefix is not None:
            self.prefix.registered[seq.seq_id] = seq.num_cached // self.kv.block_size
        self.counters.swapped_in += 1

    def _release_swap(self, seq: Sequence) -> None:
        if seq.swapped is not None:
            self.kv.drop_saved([p["handle"] for part in ("hot", "warm") for *_, p in seq.swapped.get(part, [])])
            self.swap_bytes -= seq.swapped.get("bytes", 0)
            seq.swapped = None


# One auto-sized chunk's matmul FLOPs: about 0.35-0.5 s on an H200 at 55-70% of its measured
# 770 TFLOP/s (BENCHMARKS.md), the longest a mixed step makes the running sequences wait
CHUNK_STEP_FLOPS = 2.5e14
MAX_AUTO_CHUNK = 32768


def auto_prefill_chunk(model: ModelConfig, free_bytes: int, kv_bytes: int, elem_size: int,
                       max_batched: int | None = None) -> int:
    """The prefill chunk for a GPU: the largest power of two from DEFAULT_PREFILL_CHUNK to
    MAX_AUTO_CHUNK whose step stays within CHUNK_STEP_FLOPS of matmuls (the latency bound of the
    decodes that share the step) and whose activations (hidden states, q/k/v, gate/up and their
    product, float32 attention rows) fit in half the memory left after the KV pool
    (`free_bytes - kv_bytes`), and not above `max_batched` tokens a step when that is set."""
    h, i, n_layers = model.hidden_size, model.intermediate_size, model.num_layers
    q = model.num_heads * model.head_dim
    qkv = q + 2 * model.num_kv_heads * model.head_dim
    flops = 2.0 * n_layers * (h * qkv + q * h + 3 * h * i)
    act_bytes = elem_size * (6 * h + 2 * qkv + 3 * i) + 4 * q
    limit = min(CHUNK_STEP_FLOPS / flops, max(free_bytes - kv_bytes, 0) / 2 / act_bytes, MAX_AUTO_CHUNK)
    if max_batched:
        limit = min(limit, max_batched)
    chunk = DEFAULT_PREFILL_CHUNK
    while chunk * 2 <= limit:
        chunk *= 2
    return chunk


def resolve_prefill_chunk(sched: SchedulerConfig, cache: CacheConfig, model: ModelConfig, device, elem_size: int) -> int:
    """`sched.max_prefill_chunk` if set; else on CUDA `auto_prefill_chunk` over the device's free
    memory less the KV pool `cache.memory_budget` asks for (its default: `default_kv_budget`),
    elsewhere DEFAULT_PREFILL_CHUNK."""
    if sched.max_prefill_chunk:
        return sched.max_prefill_chunk
    if getattr(device, "type", str(device)) != "cuda":
        return DEFAULT_PREFILL_CHUNK
    free = free_memory_bytes(device)
    budget = cache.memory_budget
    if budget is None:  # the pool's default, over an upper bound of one full context (every layer global)
        ctx = sched.max_model_len or model.max_position_embeddings
        seq_bytes = 2 * ctx * model.num_layers * model.num_kv_heads * model.head_dim * elem_size
        kv = default_kv_budget(seq_bytes, sched.max_num_seqs, free)
    else:
        kv = int(budget * free) if isinstance(budget, float) and budget <= 1 else int(budget)
    return auto_prefill_chunk(model, free, kv, elem_size, sched.max_num_batched_tokens)


def prompt_tail(prefill_len: int, block_size: int) -> int:
    """The last block boundary before a prompt's last token: the tokens from there on (1 to
    block_size of them) are computed as a chunk of their own, so a later request with the same
    prompt takes every full block before it from the prefix cache and computes that same chunk."""
    return ((prefill_len - 1) // block_size) * block_size


def next_prefill_end(s: Sequence, chunk: int, block_size: int | None = None) -> int:
    """Where a sequence's next prefill chunk ends: the next multiple of `chunk` (the grid that makes
    cached and computed prefixes identical), the prompt's end, or the offset where a stored
    document is still to be placed, whichever comes first; with `block_size` (the scheduler's
    cuts), a request without a document also stops at its `prompt_tail` and its `prefill_cut`."""
    end = min((s.num_cached // chunk + 1) * chunk, s.prefill_len)
    if s.doc is not None:
        return min(end, s.doc[0])
    if block_size:
        for cut in (prompt_tail(s.prefill_len, block_size), s.prefill_cut):
            if s.num_cached < cut < end:
                end = cut
    return end
