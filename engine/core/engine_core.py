"""The engine core: one model runner, one paged KV cache with its prefix and document caches, and
one scheduler, for the engine's whole life.

`add_request` queues a sequence; each `step` schedules one batch (decodes, prefill chunks,
admissions), runs it through the model runner, demotes what left the hot window, samples a token
for every sequence that produced one, hands it to the output processor (text, stop strings, finish
reason) and frees the sequences that finished; it returns what that step produced. `abort` drops
an unfinished request; `has_unfinished` says whether anything is queued, running or swapped out.

Beside that loop, `prefill_collect` runs a prompt through the runner outside the scheduler (for
scoring, attribution and logits) and `place_document` writes a stored document's KV into a
sequence (the scheduler's `on_place` callback).
"""

from __future__ import annotations

import itertools
import logging
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from engine.attention.backend import AttentionBackend
from engine.config import CacheConfig, EngineConfig
from engine.core.metrics import EngineCounters
from engine.core.output_processor import OutputProcessor
from engine.core.sampling import SamplingParams, sample_batch
from engine.core.scheduler import Scheduler
from engine.core.sequence import Sequence
from engine.core.speculative import DraftGovernor, NgramProposer
from engine.errors import CacheFullError, ContextLengthError
from engine.kv.cold import ColdTier, DiskStore, HostStore
from engine.kv.document_cache import DocumentCache
from engine.kv.paged_cache import PagedKVCache
from engine.kv.prefix_cache import PrefixCache
from engine.model.decoder import CausalLM
from engine.runner.cuda_graph import attach_graphs
from engine.runner.forward_context import Capture
from engine.runner.model_runner import ModelRunner

log = logging.getLogger(__name__)


@dataclass
class TokenOutput:
    """One token a step produced for a sequence, and the text it added to the stream."""

    seq: Sequence
    token: int
    text: str


def make_cold_tier(cache: CacheConfig, device: torch.device) -> ColdTier | None:
    """The cold tier `cache` asks for (host memory and/or disk), or None."""
    host = HostStore(cache.host_cache_bytes, pin=device.type == "cuda") if cache.host_cache_bytes else None
    disk = None
    if cache.disk_cache_dir:
        try:  # a path that is a file raises CacheDirError (one line, for the caller to print)
            disk = DiskStore(Path(cache.disk_cache_dir), cache.disk_cache_bytes)
        except OSError as exc:  # read-only or not ours: answer uncached rather than fail
            log.warning("disk KV cache %s cannot be written (%s); running without it (nothing is cached on disk)",
                        cache.disk_cache_dir, exc.strerror or exc)
    if host is None and disk is None:
        return None
    return ColdTier(host, disk, write_through=True)


class EngineCore:
    """The step loop over one model and its caches (see the module docstring).

    config: the engine's, resolved (its scheduler part's max_model_len set). fingerprint: the
    model's, for the prefix and document caches. runner: the model runner (None: a ModelRunner
    over model, kv and backend)."""

    def __init__(self, model: CausalLM, kv: PagedKVCache, backend: AttentionBackend, device: torch.device,
                 config: EngineConfig, fingerprint: str, output: OutputProcessor,
                 runner: ModelRunner | None = None) -> None:
        self.model, self.kv, self.device = model, kv, device
        self.config = config
        self.max_model_len = config.scheduler.max_model_len
        self.chunk = chunk = config.scheduler.prefill_chunk
        cache = config.cache
        self.output = output
        self.prefix = PrefixCache(kv, fingerprint, chunk, cold=make_cold_tier(cache, device))
        self.runner = runner or ModelRunner(model, kv, backend, device)  # (a tensor-parallel rank 0's, engine/parallel)
        self.runner.on_computed = self.prefix.register
        attach_graphs(self.runner, config.load.cuda_graphs)
        self._ids = itertools.count()
        self.documents = DocumentCache(kv, self.runner, fingerprint, chunk, self.prefix.cold,
                                       check_len=self.check_len, new_id=self.new_id, free=self.free)
        self.scheduler = Scheduler(kv, config.scheduler,
                                   prefix=self.prefix if config.scheduler.prefix_caching else None,
                                   on_place=self.place_document)
        self._occupancy = [0, 0]  # [tokens stored, slots allocated] of finished requests' tables
        k = config.scheduler.speculative_tokens(device.type)
        if k < 0:
            raise ValueError(f"num_speculative_tokens must be >= 0, not {k}")
        # prompt-lookup drafts for greedy decodes (engine/core/speculative.py); None: off
        self.proposer = NgramProposer(k) if k > 0 else None
        # how many drafts a decode-only step verifies, from measured costs (None: always up to k)
        self.governor = DraftGovernor(k) if k > 0 and config.scheduler.adaptive_speculation else None

    # ------------------------------------------------------------------ requests
    def new_id(self) -> int:
        return next(self._ids)

    def check_len(self, n: int, what: str = "prompt") -> None:
        """Raise when a sequence of `n` tokens cannot run: longer than max_model_len
        (ContextLengthError) or than the KV cache holds for one sequence (CacheFullError)."""
        if n > self.max_model_len:
            raise ContextLengthError(
                f"{what} is {n} tokens, longer than the configured context of {self.max_model_len} tokens (max_model_len)"
            )
        if n > self.kv.max_tokens_per_seq():
            raise CacheFullError(
                f"{what} is {n} tokens but the KV cache holds at most {self.kv.max_tokens_per_seq()} tokens per "
                "sequence; raise the cache memory budget"
            )

    def new_sequence(self, ids: list[int], params: SamplingParams, text: str | None) -> Sequence:
        """A request's sequence, with its own seeded generator when it samples."""
        gen = None
        if not params.greedy:
            gen = torch.Generator().manual_seed(
                params.seed if params.seed is not None else int(torch.randint(0, 2**62, (1,)))
            )
        return Sequence(self.new_id(), ids, params, text, generator=gen)

    def add_request(self, seq: Sequence) -> None:
        self.scheduler.add(seq)

    def abort(self, seq: Sequence) -> None:
        """Drop `seq` if it has not finished, releasing its blocks."""
        self.scheduler.abort(seq)
        if self.proposer is not None:
            self.proposer.forget(seq.seq_id)

    def has_unfinished(self) -> bool:
        return self.scheduler.has_work

    # ------------------------------------------------------------------ one step
    def step(self) -> list[TokenOutput]:
        """Schedule and run one batch; return the token of every sequence that produced one."""
        t_step = time.perf_counter()
        batch = self.scheduler.schedule()
        # the governor prices steps by their longest decode's context (not needed without it)
        context = max((s.num_tokens for s in batch.decodes), default=0) if self.governor is not None else 0
        verify = self._drafts(batch, context)
        decodes = batch.decodes
        if verify:
            drafted = {s.seq_id for s, _ in verify}
            decodes = [s for s in decodes if s.seq_id not in drafted]
            for s, d in verify:  # the runner reads a chunk's tokens from the sequence
                s.output_ids.extend(d)
        try:
            hidden = self.runner.forward(batch.prefills, decodes, verify=[(s, len(d) + 1) for s, d in verify])
        finally:
            for s, d in verify:
                del s.output_ids[len(s.output_ids) - len(d):]
        rows, stepped = [], []
        off = 0
        for s, n in batch.prefills:
            off += n
            if s.num_cached == s.num_tokens:  # the prompt is complete: sample its first token
                rows.append(off - 1)
                stepped.append(s)
        checks = []  # (sequence, drafts, index of its first row in `rows`)
        for s, d in verify:
            checks.append((s, d, len(rows)))
            rows += range(off, off + len(d) + 1)
            stepped += [s] * (len(d) + 1)
            off += len(d) + 1
        for i, s in enumerate(decodes):
            rows.append(off + i)
            stepped.append(s)
        self.kv.demote_all([(s.tables, s.num_cached) for s in [p for p, _ in batch.prefills] + decodes])
        if not stepped:
            return []
        toks = None
        if all(s.params.greedy and s.params.repetition_penalty == 1.0 for s in stepped):
            toks = self.model.greedy(hidden[rows])  # int8 weights on the CPU: the argmax without every logit
        if toks is None:
            logits = self.model.logits(hidden[rows])
            toks = sample_batch(logits, [s.params for s in stepped],  # all_ids copies O(context): only if used
                                [s.all_ids if s.params.repetition_penalty != 1.0 else [] for s in stepped],
                                [s.generator for s in stepped])
        t = time.perf_counter()
        outs = []
        for s, d, first in checks:
            outs += self._accept(s, d, toks[first:first + len(d) + 1], t)
        checked = {s.seq_id for s, _, _ in checks}
        for s, tok in zip(stepped, toks, strict=True):
            if s.seq_id in checked:
                continue
            outs.append(self._emit(s, tok, t))
            if s.finished:
                self._finish(s)
        if self.governor is not None and not batch.prefills:
            self.governor.observe(len(stepped), time.perf_counter() - t_step, bool(verify), context)
        return outs

    def _emit(self, s: Sequence, tok: int, t: float) -> TokenOutput:
        """Append a token to `s` and stream its text (`s.finished` says whether that ended it)."""
        s.output_ids.append(tok)
        if s.first_token_time is None:
            s.first_token_time = t
        s.token_times.append(t)
        return TokenOutput(s, tok, self.output.process(s, tok))

    def _finish(self, s: Sequence) -> None:
        """A request that finished: count its KV slots and release it."""
        self._record_occupancy(s)
        self.scheduler.finish(s)
        if self.proposer is not None:
            self.proposer.forget(s.seq_id)

    # ------------------------------------------------------------------ prompt-lookup drafts
    def _drafts(self, batch, context: int = 0) -> list[tuple[Sequence, list[int]]]:
        """Draft tokens for the step's greedy decodes (engine/core/speculative.py), within the
        KV blocks free after every decode's own slot, each sequence's max_tokens and context, and
        (in a step of decodes only) fewer rows in all than the runner's `exact_rows`: on the CPU,
        the row count below which every row is computed exactly as a lone decode step; and as
        many a sequence as the governor finds paying at this `context` (the longest decode's
        tokens)."""
        if self.proposer is None or not batch.decodes:
            return []
        bs = self.kv.block_size
        free = self.scheduler.free_after_step()  # each decode's own slot and the prefills' chunks come first
        rows_left = None
        exact = self.runner.exact_rows
        if exact is not None and not batch.prefills:
            rows_left = exact - 1 - len(batch.decodes)
        # a decode-only step: as many drafts a sequence as pay for their rows (DraftGovernor)
        cap = None
        if self.governor is not None and not batch.prefills:
            cap = self.governor.limit(len(batch.decodes), context)
        if cap == 0:
            return []
        out = []
        for s in batch.decodes:
            p = s.params
            if not p.greedy or p.repetition_penalty != 1.0:
                continue
            room = min(p.max_tokens - len(s.output_ids) - 1, self.max_model_len - s.num_tokens,
                       self.kv.max_tokens_per_seq() - s.num_tokens)
            if rows_left is not None:
                room = min(room, rows_left)
            if cap is not None:
                room = min(room, cap)
            d = self.proposer.propose(s, room) if room > 0 else []
            if not d:
                continue
            end = (s.num_tokens + len(d) + bs - 1) // bs
            need = [max(0, end - max(len(t), (s.num_tokens + bs - 1) // bs)) for t in s.tables]
            if any(n > f for n, f in zip(need, free, strict=True)):
                continue
            free = [f - n for f, n in zip(free, need, strict=True)]
            if rows_left is not None:
                rows_left -= len(d)
            out.append((s, d))
        return out

    def _accept(self, s: Sequence, drafts: list[int], toks: list[int], t: float) -> list[TokenOutput]:
        """A verified chunk: toks[i] is the greedy token after the chunk's i-th row. Emit the drafts
        that match it and the first greedy token that differs (or follows the last draft); keep
        the K/V of the accepted positions only, then let the prefix cache index and the windows
        release (`after_forward`) and the warm tier demote, as a plain step does."""
        a = 0
        while a < len(drafts) and drafts[a] == toks[a]:
            a += 1
        self.proposer.record(s, len(drafts), a)
        if self.governor is not None:
            self.governor.record(len(drafts), a)
        s.num_cached += a + 1  # the uncached token and the accepted drafts
        outs = []
        for tok in drafts[:a] + [toks[a]]:
            outs.append(self._emit(s, tok, t))
            if s.finished:
                break
        s.num_cached = min(s.num_cached, s.num_tokens)  # finished early: drop K/V past its last token
        self.kv.trim(s.tables, s.num_cached)
        self.runner.after_forward([s])
        self.kv.demote(s.tables, s.num_cached)
        if s.finished:
            self._finish(s)
        return outs

    # ------------------------------------------------------------------ outside the scheduler
    def free(self, seq: Sequence) -> None:
        """Release a sequence's blocks and its prefix-cache registration."""
        self.kv.free(seq.tables)
        self.prefix.release(seq)

    def prefill_collect(
        self, ids: list[int], rows_from: int, capture_layers: set[int] | None = None, chunk: int | None = None,
        reuse: bool = False,
    ) -> tuple[Sequence, torch.Tensor, list[Capture]]:
        """Prefill `ids` as a temporary sequence in chunks (of `chunk` tokens; None: the engine's);
        return it, the final hidden states of positions rows_from.. and the attention captures of
        those positions. The caller frees the sequence (`free`). reuse: take the longest prefix
        before rows_from from the prefix cache (any registered cut: a document a batch just read)
        instead of computing it; the hidden states then start at rows_from."""
        return self.prefill_collect_many([(ids, rows_from)], capture_layers, chunk, reuse)[0]

    def prefill_collect_many(
        self, items: list[tuple[list[int], int]], capture_layers: set[int] | None = None, chunk: int | None = None,
        reuse: bool = False,
    ) -> list[tuple[Sequence, torch.Tensor, list[Capture]]]:
        """`prefill_collect` for several (ids, rows_from) at once: every forward carries the next
        piece of each sequence still prefilling, up to `chunk` tokens in all, so many short
        remainders (attribution's answers over documents the prefix cache holds) share one forward
        instead of one each. Per item: its sequence (the caller frees it), hidden states of rows
        rows_from.., captures. CacheFullError (every sequence freed) when the pool cannot hold them
        together."""
        seqs: list[Sequence] = []
        try:
            need = [0] * len(self.kv.groups)
            for ids, rows_from in items:
                self.check_len(len(ids))
                seq = Sequence(self.new_id(), ids, SamplingParams(max_tokens=0))
                seq.tables = self.kv.new_tables()
                seq.rope_seq_len = len(ids)
                seqs.append(seq)
                if reuse and self.scheduler.prefix_caching and rows_from > 0:
                    self.prefix.match_and_attach(seq, upto=rows_from, any_cut=True)
                for g, (n, table) in enumerate(zip(self.kv.blocks_needed(len(ids)), seq.tables, strict=True)):
                    need[g] += max(0, n - sum(e != -1 for e in table))
            if any(n > f for n, f in zip(need, self.kv.num_free(), strict=True)):
                raise CacheFullError(f"KV cache has no room for {sum(len(i) for i, _ in items)} tokens in "
                                     f"{len(items)} sequences; raise the cache memory budget")
            hiddens: list[list[torch.Tensor]] = [[] for _ in items]
            captures: list[list[Capture]] = [[] for _ in items]
            chunk = chunk or self.chunk
            while any(s.num_cached < len(ids) for s, (ids, _) in zip(seqs, items, strict=True)):
                step, rows, off = [], [], 0  # rows: (item, first batch row, end row) to keep
                for k, (seq, (ids, rows_from)) in enumerate(zip(seqs, items, strict=True)):
                    left = chunk - off
                    if seq.num_cached >= len(ids) or left <= 0:
                        continue
                    start = seq.num_cached
                    n = min(left, len(ids) - start)
                    step.append((seq, n))
                    if start + n > rows_from:
                        rows.append((k, off + max(rows_from - start, 0), off + n))
                    off += n
                cap = None
                if capture_layers is not None and rows:
                    index = torch.cat([torch.arange(a, b) for _, a, b in rows]).to(self.runner.device)
                    cap = Capture(capture_layers, index)
                h = self.runner.forward(step, [], capture=cap)
                for seq, _ in step:
                    self.kv.demote(seq.tables, seq.num_cached if capture_layers is None else 0)  # attribution reads hot K
                at = 0
                for k, a, b in rows:
                    hiddens[k].append(h[a:b])
                    if cap is not None:
                        m = b - a
                        captures[k].append(Capture(capture_layers, slice(0, m),
                                                   {layer: q[at:at + m] for layer, q in cap.q.items()},
                                                   {layer: x[at:at + m] for layer, x in cap.lse.items()},
                                                   origin=(cap.forward_id, at, m) if cap.forward_id is not None else None))
                        at += m
        except BaseException:
            for seq in seqs:
                self.free(seq)
            raise
        return [(seq, torch.cat(hs) if hs else torch.empty(0), caps)
                for seq, hs, caps in zip(seqs, hiddens, captures, strict=True)]

    def place_document(self, seq: Sequence) -> None:
        """The sequence's cached tokens reached its document's offset: write the document's KV."""
        offset, doc = seq.doc
        self.documents.place(seq, doc, offset)
        seq.doc = None

    # ------------------------------------------------------------------ observability
    def _record_occupancy(self, s: Sequence) -> None:
        """Add a finishing request's KV slots (hot and warm blocks its tables hold) and the tokens
        they store to the fragmentation count."""
        bs = self.kv.block_size
        for table in s.tables:
            for b, e in enumerate(table):
                if e != -1:
                    self._occupancy[1] += bs
                    self._occupancy[0] += max(0, min(bs, s.num_cached - b * bs))

    def counters(self) -> EngineCounters:
        """Engine-wide counters: blocks in use per tier now (hot and warm summed over cache groups;
        host and disk as block-equivalents: stored bytes over the full-precision bytes of one block
        of every layer), prefix lookups and hits in blocks (device and cold tier), swaps,
        preemptions, the bytes the tier copier moved each way, and the fragmentation of finished
        requests' KV slots. `fallbacks` is the caller's to fill."""
        c = EngineCounters()
        tiers = self.kv.blocks_per_tier()
        c.set_blocks("hot", sum(tiers["hot_used"]))
        c.set_blocks("warm", sum(tiers["warm_used"]))
        cold = self.prefix.cold
        if cold is not None:
            g = self.kv.groups[0]
            block_all_layers = 2 * self.kv.block_size * g.k.shape[3] * g.k.shape[4] * g.k.element_size() * self.model.config.num_layers
            st = cold.stats()
            for tier in ("host", "disk"):
                if st.get(tier):
                    c.set_blocks(tier, int(st[tier]["bytes"]) // block_all_layers)
        ps = self.prefix.stats
        bs = self.kv.block_size
        c.record_prefix_lookup(ps.query_tokens // bs, min(ps.query_tokens // bs, (ps.hit_tokens + ps.cold_hit_tokens) // bs))
        sc = self.scheduler.counters
        c.swaps_out, c.swaps_in = sc.preempted_swap, sc.swapped_in
        c.preemptions = sc.preempted_swap + sc.preempted_recompute
        c.copy_bytes_to_host = self.kv.copier.stats.bytes_to_host
        c.copy_bytes_to_device = self.kv.copier.stats.bytes_to_device
        c.set_occupancy(*self._occupancy)
        if self.proposer is not None:
            c.spec_drafted, c.spec_accepted = self.proposer.stats.drafted, self.proposer.stats.accepted
        return c
