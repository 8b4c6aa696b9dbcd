"""Document reuse at any position: a document's KV computed once, stored, and placed behind any
instructions, in front of any question.

The usual prefix cache only helps when everything before the document is identical. Here a
document's KV is computed on its own — [BOS] + document at positions 0..L, so the document's
tokens see a normal attention sink — and stored keyed by (model fingerprint, document content
hash, chunk) in the cold tier (host memory, and disk when configured: a new process reuses it).
To use it behind instructions of o tokens (BOS included), the document's keys are re-rotated from
positions 1..L to o..o+L-1: RoPE rotates each frequency pair by an angle linear in the position, so
rotating a key already at position p by the angle of (o - 1) puts it at p + o - 1 (YaRN's
attention factor multiplies both and is left alone; dynamic NTK scaling is not linear in the
position and is refused). The question is then prefilled normally and sees instructions and
document.

This is an approximation of a full recompute: the document's tokens did not attend to the
instructions (they attended to their own BOS). Its cost is measured, not assumed
(benchmarks/bench_doc_reuse.py, BENCHMARKS.md): logit difference and needle accuracy
against computing the whole prompt normally. It is deterministic: computed or loaded, a document
placed at the same offset gives the same tokens.

Global layers store every document position (per chunk of max_prefill_chunk tokens); sliding
layers store only the last `window` positions, which is all a question after the document sees.

Use: `LLM.generate_with_document(instructions, document, question, params)` (and
`stream_with_document`, `document_logits`). The sequence carries `doc = (offset, DocumentKV)`; the
scheduler prefills the instructions up to the offset, calls `EngineCore.place_document` (its
`on_place` callback), then prefills the question. `register_limit = offset` keeps the prefix cache from indexing
any block that holds placed (approximate) KV, and a sequence holding a placed document is always
preempted by swap (recomputing it would silently turn it into a different, exact computation).
With a warm tier the document is still computed at full precision (nothing demoted while it is
read); the placed blocks are demoted like any prefilled ones. The store is `DocumentCache.store()`:
the configured cold tier (host memory / disk), else a host-memory store of the document cache's own.
An entry that is missing, fails the store's checks or has unexpected shapes is recomputed.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from engine.core.sampling import SamplingParams
from engine.core.sequence import Sequence
from engine.errors import CacheFullError, EngineError, RequestCancelled
from engine.kv.block_hash import encode_tokens
from engine.kv.cold import ColdTier, HostStore
from engine.kv.paged_cache import PagedKVCache, free_memory_bytes
from engine.model.rope import apply_rope

if TYPE_CHECKING:
    from engine.runner.model_runner import ModelRunner

log = logging.getLogger(__name__)


@dataclass
class DocumentKV:
    """A document's KV as computed on its own: per group (first document index stored, K, V),
    K and V as CPU tensors [layers, tokens, kv_heads, head_dim] at positions index + 1."""

    key: str
    token_ids: list[int]
    groups: list[tuple[int, torch.Tensor, torch.Tensor]]
    loaded: bool = False  # True when it came from the store rather than being computed

    @property
    def num_tokens(self) -> int:
        return len(self.token_ids)


class DocumentCache:
    """Documents' standalone KV: computed with `runner` into `kv`, kept in a cold tier, placed into
    sequences.

    fingerprint: the model's (part of every key). chunk: the prefill chunk (it decides the stored
    parts and the computation's shapes). cold: the engine's cold tier, or None: then a host-memory
    store of this cache's own, made on first use (`store`). check_len(n, what): raises when a
    sequence of n tokens cannot run. new_id(): a fresh sequence id. free(seq): releases a
    sequence's blocks (and its prefix-cache registration)."""

    def __init__(self, kv: PagedKVCache, runner: ModelRunner, fingerprint: str, chunk: int, cold: ColdTier | None,
                 check_len: Callable[[int, str], None], new_id: Callable[[], int],
                 free: Callable[[Sequence], None]) -> None:
        self.kv, self.runner, self.model = kv, runner, runner.model
        self.fingerprint, self.chunk = fingerprint, chunk
        self.cold = cold
        self.check_len, self.new_id, self.free = check_len, new_id, free
        self._own_store: ColdTier | None = None
        self.computed = 0
        self.loaded = 0

    def store(self) -> ColdTier:
        """The cold tier that stores documents' KV: the engine's when one is configured
        (CacheConfig.host_cache_bytes / disk_cache_dir; with a disk, a new process reuses them),
        else a host-memory store of this cache's own, made on first use, of min(2 GiB, 1/8 of the
        available host memory)."""
        if self.cold is not None:
            return self.cold
        if self._own_store is None:
            cap = max(64 * 2**20, min(2 * 2**30, free_memory_bytes(torch.device("cpu")) // 8))
            self._own_store = ColdTier(HostStore(cap, pin=self.kv.device.type == "cuda"), None)
        return self._own_store

    # ------------------------------------------------------------------ keys
    def doc_key(self, ids: list[int]) -> str:
        """Names one document's standalone KV: model fingerprint, prefill chunk (it decides the
        store's parts and the computation's shapes) and the token ids."""
        h = hashlib.sha256(b"longdoc-document-v1\0")
        h.update(self.fingerprint.encode())
        h.update(f"\0chunk={self.chunk}\0".encode())
        h.update(encode_tokens(ids))
        return h.hexdigest()

    @staticmethod
    def _part_key(key: str, part: str) -> str:
        return hashlib.sha256(f"{key}:{part}".encode()).hexdigest()

    def _parts(self, n: int) -> list[str]:
        """Store entries of a document of n tokens: "chunk{i}" per prefill chunk for the global
        groups (all of them in one entry), "win{gi}" per sliding group (its last window)."""
        chunk = self.chunk
        groups = self.kv.groups
        parts = []
        if any(g.window is None for g in groups):
            parts += [f"chunk{i}" for i in range((n + chunk - 1) // chunk)]
        parts += [f"win{gi}" for gi, g in enumerate(groups) if g.window is not None]
        return parts

    # ------------------------------------------------------------------ compute / load
    def get(self, ids: list[int], on_chunk: Callable[[int, int], bool | None] | None = None) -> DocumentKV:
        """The document's KV from the store, or computed (and stored).

        on_chunk(tokens done, tokens total): called after every prefill chunk of the computation
        (once with (n, n) when the KV was loaded); returning True stops it: the blocks are freed,
        nothing is stored, and RequestCancelled is raised."""
        if self.kv.ops is not None:  # its reads and writes of the pools are not replayed on the other ranks
            raise EngineError("document reuse (stored document KV) is not supported with tensor_parallel_size > 1 yet")
        if self.runner.dynamic_rope:
            raise EngineError("document reuse needs a RoPE linear in the position; this model uses dynamic NTK scaling")
        if not ids:
            raise EngineError("empty document")
        key = self.doc_key(ids)
        doc = self._load(key, ids)
        if doc is not None:
            self.loaded += 1
            if on_chunk is not None and on_chunk(len(ids), len(ids)):
                raise RequestCancelled("cancelled after the document's KV was loaded")
            return doc
        doc = self._compute(key, ids, on_chunk)
        self._store(doc)
        self.computed += 1
        return doc

    def _tier(self):
        return self.store()

    def _first(self, gi: int, n: int) -> int:
        """First document index group gi stores of a document of n tokens."""
        w = self.kv.groups[gi].window
        return 0 if w is None else max(0, n - w + 1)

    def _load(self, key: str, ids: list[int]) -> DocumentKV | None:
        """The stored KV of `ids`, or None when any entry is missing, fails the store's checks
        (tokens, fingerprint, checksum) or does not have the shapes this cache expects."""
        tier = self._tier()
        fp = self.fingerprint
        chunk = self.chunk
        n = len(ids)
        pieces: dict[int, list[tuple[int, str, torch.Tensor]]] = {}
        try:
            for part in self._parts(n):
                toks = ids if part.startswith("win") else ids[: (int(part[5:]) + 1) * chunk]
                e = tier.get(self._part_key(key, part), tokens=toks, fingerprint=fp)
                if e is None:
                    return None
                first = int(e.meta["first"])
                for name, t in e.tensors.items():
                    g, kv = name.split(".")
                    pieces.setdefault(int(g[1:]), []).append((first, kv, t))
            groups = []
            for gi, g in enumerate(self.kv.groups):
                items = sorted(pieces.get(gi, []), key=lambda x: (x[0], x[1]))
                ks = [t for _, kv, t in items if kv == "k"]
                vs = [t for _, kv, t in items if kv == "v"]
                if not ks or len(ks) != len(vs):
                    raise ValueError(f"group {gi} incomplete")
                k, v = torch.cat(ks, dim=1), torch.cat(vs, dim=1)
                first = self._first(gi, n)
                shape = (len(g.layers), n - first, g.k.shape[3], g.k.shape[4])
                if items[0][0] != first or tuple(k.shape) != shape or tuple(v.shape) != shape or k.dtype != g.k.dtype:
                    raise ValueError(f"group {gi} has shape {tuple(k.shape)}, expected {shape}")
                groups.append((first, k, v))
        except (KeyError, ValueError, TypeError, RuntimeError) as exc:
            log.warning("stored document %s unusable (%s); recomputing", key[:12], exc)
            return None
        return DocumentKV(key, list(ids), groups, loaded=True)

    def _store(self, doc: DocumentKV) -> None:
        tier = self._tier()
        fp = self.fingerprint
        chunk = self.chunk
        groups = self.kv.groups
        n = doc.num_tokens
        for part in self._parts(n):
            tensors = {}
            if part.startswith("win"):
                gi = int(part[3:])
                first, k, v = doc.groups[gi]
                toks = doc.token_ids
                tensors[f"g{gi}.k"], tensors[f"g{gi}.v"] = k, v
            else:
                i = int(part[5:])
                lo, hi = i * chunk, min(n, (i + 1) * chunk)
                toks, first = doc.token_ids[:hi], lo
                for gi, (f, k, v) in enumerate(doc.groups):
                    if groups[gi].window is None:
                        tensors[f"g{gi}.k"], tensors[f"g{gi}.v"] = k[:, lo - f : hi - f], v[:, lo - f : hi - f]
            if not tier.put(self._part_key(doc.key, part), toks, tensors, fingerprint=fp,
                            meta={"first": first, "doc_tokens": n}, persist=True):
                log.warning("document %s: the store did not take part %s (too large for it?)", doc.key[:12], part)

    @torch.inference_mode()
    def _compute(self, key: str, ids: list[int],
                 on_chunk: Callable[[int, int], bool | None] | None = None) -> DocumentKV:
        """Prefill [BOS] + document on its own, chunk by chunk, keeping the global layers' K/V of
        every document token and the sliding layers' K/V of the last `window` tokens. Nothing is
        demoted to a warm tier meanwhile: the document is computed at full precision (a sequence
        must fit the hot pool anyway, `check_len`), so every block read is hot."""
        bos = self.model.config.bos_token_id
        full = ([bos] if bos is not None else []) + list(ids)
        shift = len(full) - len(ids)  # 1 with a BOS
        self.check_len(len(full), "document (with BOS)")
        need = self.kv.blocks_needed(len(full))
        if any(nb > f for nb, f in zip(need, self.kv.num_free(), strict=True)):
            raise CacheFullError(f"KV cache has no room for a document of {len(ids)} tokens; raise the cache memory budget")
        seq = Sequence(self.new_id(), full, SamplingParams(max_tokens=0))
        seq.tables = self.kv.new_tables()
        seq.register_limit = 0  # standalone KV must never enter the prefix cache
        groups = self.kv.groups
        glob_k: dict[int, list[torch.Tensor]] = {gi: [] for gi, g in enumerate(groups) if g.window is None}
        glob_v: dict[int, list[torch.Tensor]] = {gi: [] for gi in glob_k}
        chunk = self.chunk
        result: list[tuple[int, torch.Tensor, torch.Tensor] | None] = [None] * len(groups)
        try:
            while seq.prefilling:
                start = seq.num_cached
                n = min(chunk, len(full) - start)
                self.runner.forward([(seq, n)], [])
                lo, hi = max(start, shift), start + n  # positions of document tokens in this chunk
                if hi > lo:
                    for gi in glob_k:
                        k, v = self._read(gi, seq.tables[gi], lo, hi)
                        glob_k[gi].append(k)
                        glob_v[gi].append(v)
                if on_chunk is not None and on_chunk(max(0, hi - shift), len(ids)) and seq.prefilling:
                    raise RequestCancelled(
                        f"document prefill cancelled after {max(0, hi - shift):,} of {len(ids):,} tokens")
                if not seq.prefilling:
                    for gi, g in enumerate(groups):
                        if g.window is not None:
                            first = shift + self._first(gi, len(ids))
                            k, v = self._read(gi, seq.tables[gi], first, len(full))
                            result[gi] = (first - shift, k, v)
        finally:
            self.free(seq)
        for gi in glob_k:
            result[gi] = (0, torch.cat(glob_k[gi], dim=1), torch.cat(glob_v[gi], dim=1))
        return DocumentKV(key, list(ids), result)

    def _read(self, gi: int, table: list[int], lo: int, hi: int) -> tuple[torch.Tensor, torch.Tensor]:
        """K, V of positions lo..hi-1 of a table, as CPU tensors [layers, hi - lo, kvh, d]."""
        g = self.kv.groups[gi]
        bs = self.kv.block_size
        pos = torch.arange(lo, hi)
        blocks = torch.tensor(table, dtype=torch.long)[pos // bs]
        assert bool((blocks >= 0).all()), "document KV read from a released or warm block"
        slots = (blocks * bs + pos % bs).to(g.k.device)
        k = g.k.flatten(1, 2).index_select(1, slots).to("cpu")
        v = g.v.flatten(1, 2).index_select(1, slots).to("cpu")
        return k, v

    # ------------------------------------------------------------------ placement
    @torch.inference_mode()
    def place(self, seq: Sequence, doc: DocumentKV, offset: int) -> None:
        """Write `doc` into `seq`'s cache at positions offset..offset+L-1 (offset = tokens before
        it, all already cached), keys re-rotated; seq.num_cached becomes offset + L. With a warm
        tier the document is written a prefill chunk at a time and the blocks behind the hot window
        are demoted in between, as between the chunks of a normal prefill."""
        kv = self.kv
        assert seq.num_cached == offset, "the document goes right after what is cached"
        n = doc.num_tokens
        delta = offset - 1 if self.model.config.bos_token_id is not None else offset
        warm = kv.has_warm()
        step = self.chunk if warm else n
        for lo in range(0, n, step):
            hi = min(n, lo + step)
            for gi, (first, k, v) in enumerate(doc.groups):
                a = max(lo, first)
                if a < hi:
                    self._write(seq, gi, k[:, a - first : hi - first], v[:, a - first : hi - first],
                                offset + a, offset + hi, delta)
            if warm:
                kv.demote(seq.tables, offset + hi)
        seq.num_cached = offset + n
        kv.release_out_of_window(seq.tables, offset + n)

    def _write(self, seq: Sequence, gi: int, k: torch.Tensor, v: torch.Tensor, pos_lo: int, pos_hi: int,
               delta: int) -> None:
        """K (re-rotated by `delta` positions) and V [layers, T, kvh, d] into positions pos_lo..pos_hi-1
        of group gi, allocating the blocks that are not there yet."""
        kv = self.kv
        bs = kv.block_size
        g = kv.groups[gi]
        table = seq.tables[gi]
        nb_end = (pos_hi + bs - 1) // bs
        while len(table) < nb_end:
            table.append(-1)
        needed = range(pos_lo // bs, nb_end)
        if any(table[b] <= -2 for b in needed):  # cannot happen: a partly written block is never demoted
            raise EngineError("document placement over a warm block")
        fresh = [b for b in needed if table[b] == -1]
        if len(fresh) > g.allocator.num_free:
            raise CacheFullError("KV cache has no room to place the document; raise the cache memory budget")
        for b in fresh:
            table[b] = g.allocator.allocate()
        pos = torch.arange(pos_lo, pos_hi)
        slots = (torch.tensor(table, dtype=torch.long)[pos // bs] * bs + pos % bs).to(g.k.device)
        for j, layer in enumerate(g.layers):
            kr = self._rerotate(layer, k[j].to(g.k.device), delta)
            g.k[j].flatten(0, 1).index_copy_(0, slots, kr.to(g.k.dtype))
            g.v[j].flatten(0, 1).index_copy_(0, slots, v[j].to(g.v.device, g.v.dtype))

    def _rerotate(self, layer: int, k: torch.Tensor, delta: int) -> torch.Tensor:
        model = self.model
        return rerotate_keys(model.ropes[model.layer_rope[layer]], k, delta)


def rerotate_keys(rope, k: torch.Tensor, delta: int) -> torch.Tensor:
    """Keys [T, kvh, d] already rotated by `rope` (an engine.model.rope.RotaryEmbedding) at their
    positions, rotated further by the angle of `delta` positions (angles in float64, product in
    float32): the keys as if computed `delta` positions later. RoPE's multiplier (YaRN's attention
    factor) is already in the keys and is not applied again."""
    ang = float(delta) * rope.inv_freq.double()
    cos = torch.cat([ang.cos(), ang.cos()]).float().to(k.device)
    sin = torch.cat([ang.sin(), ang.sin()]).float().to(k.device)
    return apply_rope(k.float(), cos[None], sin[None])
