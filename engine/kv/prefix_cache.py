"""Prefix reuse across requests: full KV blocks indexed by chained content hashes.

Every full block of a sequence gets a hash chained over all token ids before and in it and over
the model fingerprint (`engine.kv.block_hash`), so a hash names one exact prefix of one model. After
each forward the blocks a sequence has completed are registered: hash -> block id in each cache
group. A finished sequence's blocks go back to the allocator's free list with their contents (the
allocator frees in least-recently-used order and tells us when it hands a block out again), so a
later request with the same prefix takes them back instead of recomputing them.

Reuse happens at prefill-chunk boundaries, at a prompt's tail, and at a request's declared cut.
Chunked prefill always cuts the prompt on the global grid 0, C, 2C, ... (C = max_prefill_chunk),
at the last block boundary before the prompt's last token (`engine.core.scheduler.prompt_tail`)
and at `Sequence.prefill_cut` when a caller sets one (`LLM.generate_shared`: the block boundary
where the head a batch shares ends), so a request whose first P tokens come from the cache (P a
grid point, the tail of a prompt it repeats, or its cut) computes exactly the same chunks with
exactly the same shapes as a run that computed them all: its logits and tokens are bit-identical
(audit reproducibility), not merely close.

Shared blocks are never written: only full blocks are registered, and a sequence writes only at
positions >= its cached length, which lie in blocks of its own (copy-on-write is never needed).

A sliding-window group needs only the blocks the window still sees at the resume point: a hit at P
needs the global groups' blocks 0..P/bs-1 and each sliding group's blocks covering positions
P-window+1..P-1; the sliding blocks before that stay absent (-1) in the table as usual.

The cold tier (`engine.kv.cold`) extends this beyond device memory: at chunk boundaries the
prefix's blocks are written to host memory and, when a disk store is configured, to disk, keyed by
the hash of the chunk's last block; a later request (in this process or a new one) reads them
back into fresh device blocks.
"""

from __future__ import annotations

import functools
import hashlib
import logging
from dataclasses import dataclass

import torch

from engine.core.scheduler import prompt_tail
from engine.core.sequence import Sequence
from engine.kv.block_hash import chain_block_hashes
from engine.kv.paged_cache import PagedKVCache

log = logging.getLogger(__name__)


@dataclass
class PrefixStats:
    queries: int = 0  # requests looked up
    query_tokens: int = 0  # prompt tokens looked up
    hit_tokens: int = 0  # prompt tokens served from the device cache
    cold_hit_tokens: int = 0  # ... from the cold tier (host memory or disk)
    cold_writes: int = 0  # chunk entries written to the cold tier

    @property
    def hit_rate(self) -> float:
        return (self.hit_tokens + self.cold_hit_tokens) / self.query_tokens if self.query_tokens else 0.0

    def to_dict(self) -> dict:
        return {
            "queries": self.queries, "query_tokens": self.query_tokens, "hit_tokens": self.hit_tokens,
            "cold_hit_tokens": self.cold_hit_tokens, "cold_writes": self.cold_writes,
            "hit_rate": round(self.hit_rate, 4),
        }


class PrefixCache:
    def __init__(self, kv: PagedKVCache, fingerprint: str, chunk: int, cold=None, persist_boundaries: int = 2) -> None:
        # reuse needs chunk boundaries on block boundaries; otherwise the cache stays inert
        self.enabled = chunk % kv.block_size == 0
        if not self.enabled:
            log.warning("prefix reuse off: max_prefill_chunk %d is not a multiple of block_size %d",
                        chunk, kv.block_size)
        self.kv = kv
        self.fingerprint = fingerprint
        self.bs = kv.block_size
        self.chunk = chunk
        self.cold = cold  # engine.kv.cold.ColdTier or None
        self.persist_boundaries = persist_boundaries
        self.maps: list[dict[str, int]] = [{} for _ in kv.groups]  # hash -> block
        self.owner: list[dict[int, str]] = [{} for _ in kv.groups]  # block -> hash
        self.registered: dict[int, int] = {}  # seq_id -> blocks registered so far
        # hashes of blocks that end at a prompt's tail cut (a chunk boundary off the grid): a request
        # may resume there only where a run really cut its chunks there
        self.tails: set[str] = set()
        self.stats = PrefixStats()
        for gi, g in enumerate(kv.groups):
            g.allocator.on_reuse = functools.partial(self._forget, gi)

    # ------------------------------------------------------------------ bookkeeping
    def _forget(self, gi: int, block: int) -> None:
        h = self.owner[gi].pop(block, None)
        if h is not None and self.maps[gi].get(h) == block:
            del self.maps[gi][h]
            self.tails.discard(h)

    def update_hashes(self, seq: Sequence, upto: int | None = None) -> list[str]:
        """Extend seq.block_hashes to every full block of its first `upto` tokens (default: all)."""
        ids = seq.all_ids
        n_full = (len(ids) if upto is None else upto) // self.bs
        have = len(seq.block_hashes)
        if n_full > have:
            parent = seq.block_hashes[-1] if have else None
            seq.block_hashes += chain_block_hashes(
                ids[have * self.bs : n_full * self.bs], self.bs, self.fingerprint, parent=parent
            )
        return seq.block_hashes

    def _needed(self, gi: int, p: int) -> range:
        """Block indices of group gi that a sequence resuming at position p must hold."""
        w = self.kv.groups[gi].window
        first = 0 if w is None else max(0, p - w + 1) // self.bs
        return range(first, p // self.bs)

    def _device_has(self, seq: Sequence, p: int) -> bool:
        return all(seq.block_hashes[b] in self.maps[gi] for gi in range(len(self.maps)) for b in self._needed(gi, p))

    # ------------------------------------------------------------------ lookup
    def match_and_attach(self, seq: Sequence, upto: int | None = None, any_cut: bool = False) -> int:
        """Give `seq` the longest cached prefix (a multiple of the chunk, or a tail or cut where a run
        cut its prefill; leaving at least one token to compute unless the sequence only re-prefills
        after a preemption); returns its length.
        A document request (engine/kv/document_cache.py) looks up its instructions only: the prefix stops
        at the document's offset (its question is computed after the placed document). `upto`: attach
        at most that many tokens. `any_cut`: also resume at the longest cut another request
        registered (a read-only pass such as attribution, whose chunks need not repeat a run's)."""
        target = seq.prefill_len
        limit = target if seq.prefill_target >= 0 else target - 1
        if upto is not None:
            limit = min(limit, upto)
        if seq.doc is not None:
            target = limit = min(target, seq.doc[0])
        top = (max(limit, 0) // self.chunk) * self.chunk
        # resume points off the chunk grid: the prompt's tail and its declared cut, where a run that
        # computed them cut its prefill (their last block's hash is in `tails`)
        cuts: set[int] = set()
        if seq.doc is None and target > 0 and self.enabled:
            last = (max(limit, 0) // self.bs) * self.bs
            for tail in {min(prompt_tail(target, self.bs), last), min(seq.prefill_cut, last)}:
                if tail > 0 and tail % self.chunk:
                    self.update_hashes(seq, tail)
                    if seq.block_hashes[tail // self.bs - 1] in self.tails:
                        cuts.add(tail)
        if any_cut and seq.doc is None and self.enabled and limit >= self.bs:
            last = (limit // self.bs) * self.bs
            self.update_hashes(seq, last)
            b = next((b for b in range(last // self.bs, top // self.bs, -1) if seq.block_hashes[b - 1] in self.tails), 0)
            if b:
                cuts.add(b * self.bs)
        top = max([top, *cuts])
        self.stats.queries += 1
        self.stats.query_tokens += target
        if top <= 0 or not self.enabled:
            return 0
        self.update_hashes(seq, top)
        # the global groups need every block: find the first missing one
        n_glob = top // self.bs
        for gi, g in enumerate(self.kv.groups):
            if g.window is None:
                m = self.maps[gi]
                n_glob = next((b for b in range(n_glob) if seq.block_hashes[b] not in m), n_glob)
        # the longest resume point (a cut or a grid point) whose blocks the device holds
        reach = n_glob * self.bs
        grid = range((min(top, reach) // self.chunk) * self.chunk, 0, -self.chunk)
        p = next((c for c in sorted({*cuts, *grid}, reverse=True) if c <= reach and self._device_has(seq, c)), 0)
        cold_top = top
        if self.cold is not None and seq.doc is None and self.enabled and top < seq.prefill_cut <= limit \
                and seq.prefill_cut % self.bs == 0:
            cold_top = seq.prefill_cut  # a cut another process wrote (`tails` holds only this one's)
            self.update_hashes(seq, cold_top)
        cold_p = self._cold_match(seq, p, cold_top) if self.cold is not None else p
        if cold_p > p:
            got = self._cold_attach(seq, p, cold_p)
            if got > p:
                self.stats.cold_hit_tokens += got - p
                self.stats.hit_tokens += p
                return got
        if p > 0:
            self._attach(seq, p)
            self.stats.hit_tokens += p
        return p

    def _attach(self, seq: Sequence, p: int) -> None:
        nb = p // self.bs
        for gi, g in enumerate(self.kv.groups):
            table = seq.tables[gi]
            assert not table, "attach to a sequence without blocks"
            table.extend([-1] * nb)
            for b in self._needed(gi, p):
                blk = self.maps[gi][seq.block_hashes[b]]
                g.allocator.take(blk)
                table[b] = blk
        seq.num_cached = p
        seq.cached_tokens = p
        self.registered[seq.seq_id] = nb

    def register(self, seq: Sequence) -> None:
        """Index the full blocks `seq` has completed since the last call (call before the sliding
        groups release what their window no longer sees)."""
        done = min(seq.num_cached, seq.register_limit) // self.bs
        start = self.registered.get(seq.seq_id, 0)
        if done <= start or not self.enabled:
            return
        self.update_hashes(seq, done * self.bs)
        for gi in range(len(self.maps)):
            table, m, own = seq.tables[gi], self.maps[gi], self.owner[gi]
            for b in range(start, done):
                blk = table[b]
                h = seq.block_hashes[b]
                if blk >= 0 and h not in m and blk not in own:
                    m[h] = blk
                    own[blk] = h
        self.registered[seq.seq_id] = done
        if seq.doc is None:
            for tail in (prompt_tail(seq.prefill_len, self.bs), seq.prefill_cut):
                if start * self.bs < tail <= done * self.bs and tail % self.chunk and tail % self.bs == 0:
                    self.tails.add(seq.block_hashes[tail // self.bs - 1])
        if self.cold is not None:
            self._persist(seq, start * self.bs, done * self.bs)

    def clear(self) -> None:
        """Forget every device block (the cold tier is left alone)."""
        for m, own in zip(self.maps, self.owner, strict=True):
            m.clear()
            own.clear()
        self.tails.clear()

    def release(self, seq: Sequence) -> None:
        self.registered.pop(seq.seq_id, None)

    def num_cached_blocks(self) -> list[int]:
        return [len(m) for m in self.maps]

    # ------------------------------------------------------------------ cold tier
    # Entry "chunk ending at p" (key: hash of the block ending at p) holds the global groups' blocks
    # of that chunk; entry "window at p" (key derived from the same hash) holds what each sliding
    # group's window sees at p. A resume at q needs every chunk entry up to q and the window at q.
    def _chunk_key(self, seq: Sequence, p: int) -> str:
        return seq.block_hashes[p // self.bs - 1]

    def _window_key(self, seq: Sequence, p: int) -> str:
        return hashlib.sha256(b"window:" + bytes.fromhex(self._chunk_key(seq, p))).hexdigest()

    def _persist(self, seq: Sequence, lo: int, hi: int) -> None:
        """Write the chunk boundaries in (lo, hi] of the prompt to the cold tier: the chunk's global
        blocks, and, for the last `persist_boundaries` boundaries of the prompt only, the sliding
        windows there (what a next question over the same document resumes from; window-sized
        each, so storing one per boundary would multiply the bytes by the sliding layer count)."""
        prompt_end = (seq.prefill_len // self.chunk) * self.chunk
        first = (lo // self.chunk + 1) * self.chunk
        sliding = [gi for gi, g in enumerate(self.kv.groups) if g.window is not None]
        glob = [gi for gi, g in enumerate(self.kv.groups) if g.window is None]
        for p in range(first, min(hi, prompt_end) + 1, self.chunk):
            if glob:
                self._persist_chunk(seq, glob, p, "chunk")
            if sliding and p > prompt_end - self.persist_boundaries * self.chunk:
                self._persist_window(seq, sliding, p)
        cut = seq.prefill_cut
        if cut and lo < cut <= hi and cut % self.chunk and cut % self.bs == 0 and seq.doc is None:
            # a shared head's cut (`LLM.generate_shared`): the global blocks from the last grid point
            # to the cut, and the windows there, so a later process resumes at the cut, not before it
            if glob:
                self._persist_chunk(seq, glob, cut, "cut")
            if sliding:
                self._persist_window(seq, sliding, cut)

    def _persist_chunk(self, seq: Sequence, glob: list[int], p: int, kind: str) -> None:
        """The global groups' blocks from the grid point before `p` up to `p`, keyed by p's block."""
        key = self._chunk_key(seq, p)
        if not self.cold.contains(key):
            t = self._gather(seq, glob, range((p - 1) // self.chunk * self.chunk // self.bs, p // self.bs))
            if t is not None and self.cold.put(key, seq.all_ids[:p], t, fingerprint=self.fingerprint,
                                               meta={"kind": kind, "tokens": p}, persist=True):
                self.stats.cold_writes += 1

    def _persist_window(self, seq: Sequence, sliding: list[int], p: int) -> None:
        wkey = self._window_key(seq, p)
        if not self.cold.contains(wkey):
            t = self._gather(seq, sliding, None, p)
            if t is not None and self.cold.put(wkey, seq.all_ids[:p], t, fingerprint=self.fingerprint,
                                               meta={"kind": "window", "tokens": p}, persist=True):
                self.stats.cold_writes += 1

    def _gather(self, seq: Sequence, groups: list[int], rng: range | None, p: int = 0) -> dict[str, torch.Tensor] | None:
        out = {}
        for gi in groups:
            g = self.kv.groups[gi]
            blocks = [seq.tables[gi][b] for b in (rng if rng is not None else self._needed(gi, p))]
            if any(b < 0 for b in blocks):
                return None  # a block is warm (INT8) or released: not kept at full precision
            idx = torch.tensor(blocks, dtype=torch.long, device=g.k.device)
            out[f"g{gi}.k"] = g.k.index_select(1, idx).to("cpu")
            out[f"g{gi}.v"] = g.v.index_select(1, idx).to("cpu")
        return out

    def _cold_match(self, seq: Sequence, p_dev: int, top: int) -> int:
        """Longest boundary q > p_dev reachable from the cold tier (unverified: `get` checks)."""
        has_glob = any(g.window is None for g in self.kv.groups)
        has_sliding = any(g.window is not None for g in self.kv.groups)
        best = reach = p_dev
        q = p_dev + self.chunk
        while q <= top:
            if has_glob and not self.cold.contains(self._chunk_key(seq, q)):
                break
            reach = q
            if not has_sliding or self.cold.contains(self._window_key(seq, q)):
                best = q
            q += self.chunk
        cut = seq.prefill_cut
        if (cut and cut % self.chunk and cut > best and cut <= top and p_dev % self.chunk == 0
                and reach >= (cut // self.chunk) * self.chunk >= p_dev
                and (not has_glob or self.cold.contains(self._chunk_key(seq, cut)))
                and (not has_sliding or self.cold.contains(self._window_key(seq, cut)))):
            best = cut  # all grid entries up to the cut's chunk, then the cut's own entry
        return best

    def _cold_attach(self, seq: Sequence, p_dev: int, q: int) -> int:
        """Attach the device blocks up to p_dev, then read the cold entries p_dev..q' into fresh
        blocks, where q' <= q is the longest boundary whose entries all verify; returns q' (0:
        nothing attached). Every entry up to q is read, so all the bad ones are dropped by the
        store in this one run (and rewritten by this run's prefill), and a bad entry at one
        boundary does not discard the valid shorter prefix before it."""
        glob = [gi for gi, g in enumerate(self.kv.groups) if g.window is None]
        window_groups = [gi for gi, g in enumerate(self.kv.groups) if g.window is not None]
        chunk_entries: dict[int, object] = {}  # boundary -> entry (only those that verified)
        good_upto = p_dev  # every chunk entry up to here verified
        grid_q = (q // self.chunk) * self.chunk  # q itself, or the grid point before a cut q
        for p in range(p_dev + self.chunk, grid_q + 1, self.chunk):
            if not glob:
                break
            e = self.cold.get(self._chunk_key(seq, p), tokens=seq.all_ids[:p], fingerprint=self.fingerprint)
            if e is not None and all(f"g{gi}.k" in e.tensors for gi in glob):
                chunk_entries[p] = e
                if good_upto == p - self.chunk:
                    good_upto = p
        if glob and q != grid_q:  # a cut's entry: the blocks from grid_q to q
            e = self.cold.get(self._chunk_key(seq, q), tokens=seq.all_ids[:q], fingerprint=self.fingerprint)
            if e is not None and all(f"g{gi}.k" in e.tensors for gi in glob):
                chunk_entries[q] = e
                if good_upto == grid_q:
                    good_upto = q
        if not glob:
            good_upto = q
        window_entry = None
        q_ok = good_upto
        if window_groups:  # the window entry is kept for the prompt's last boundaries only
            q_ok = p_dev
            ends = ([good_upto] if good_upto % self.chunk else []) + list(
                range((good_upto // self.chunk) * self.chunk, p_dev, -self.chunk))
            for p in ends:
                if not self.cold.contains(self._window_key(seq, p)):
                    continue
                e = self.cold.get(self._window_key(seq, p), tokens=seq.all_ids[:p], fingerprint=self.fingerprint)
                if e is not None and all(f"g{gi}.k" in e.tensors for gi in window_groups):
                    window_entry, q_ok = e, p
                    break
        if q_ok <= p_dev:
            return 0
        q = q_ok
        loads: list[tuple[int, int, torch.Tensor, torch.Tensor]] = []  # (group, block index, k, v)
        for gi in glob:
            for p in sorted(b for b in chunk_entries if p_dev < b <= q):  # grid points, then a cut q
                e = chunk_entries[p]
                start = (p - 1) // self.chunk * self.chunk  # the grid point before p
                for j, b in enumerate(range(start // self.bs, p // self.bs)):
                    loads.append((gi, b, e.tensors[f"g{gi}.k"][:, j], e.tensors[f"g{gi}.v"][:, j]))
        for gi in window_groups:
            for j, b in enumerate(self._needed(gi, q)):
                loads.append((gi, b, window_entry.tensors[f"g{gi}.k"][:, j], window_entry.tensors[f"g{gi}.v"][:, j]))
        need = [sum(1 for x in loads if x[0] == gi) for gi in range(len(self.kv.groups))]
        for gi, g in enumerate(self.kv.groups):  # device blocks taken back off the free list
            if g.window is None:
                need[gi] += sum(1 for b in self._needed(gi, p_dev)
                                if g.allocator.ref_counts[self.maps[gi][seq.block_hashes[b]]] == 0)
        if any(n > g.allocator.num_free for n, g in zip(need, self.kv.groups, strict=True)):
            return 0
        nb = q // self.bs
        for table in seq.tables:
            table.extend([-1] * nb)
        for gi, g in enumerate(self.kv.groups):
            if g.window is None:
                for b in self._needed(gi, p_dev):
                    blk = self.maps[gi][seq.block_hashes[b]]
                    g.allocator.take(blk)
                    seq.tables[gi][b] = blk
        pairs = []
        for gi, b, k, v in loads:
            g = self.kv.groups[gi]
            blk = g.allocator.allocate()
            pairs += [(g.k[:, blk], k), (g.v[:, blk], v)]
            seq.tables[gi][b] = blk
        self.kv.copier.write(pairs)  # host -> device on the copy stream (engine/kv/tier_copy.py)
        seq.num_cached = q
        seq.cached_tokens = q
        self.registered[seq.seq_id] = p_dev // self.bs
        return q
