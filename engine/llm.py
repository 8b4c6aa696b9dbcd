"""`LLM`: the engine's public API — generate (batch and streaming), chat, score, attribute.

The scheduler here is deliberately simple (the scheduler issue replaces it): sequences are admitted
while the cache can hold their prompt plus `max_tokens` (blocks are reserved up front, so nothing is
ever preempted), a waiting prompt is prefilled one chunk per step, otherwise every running
sequence decodes one token in a single batched forward.
"""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Iterator
from collections.abc import Sequence as Seq
from dataclasses import dataclass, field
from pathlib import Path

import torch

from engine.attention.backend import AttentionBackend
from engine.attention.triton_backend import default_backend
from engine.config import CacheConfig
from engine.core.metrics import EngineCounters
from engine.core.sampling import SamplingParams, sample_batch
from engine.core.scheduler import Scheduler, SchedulerConfig, SchedulerCounters, next_prefill_end
from engine.core.sequence import Sequence
from engine.errors import CacheFullError, ContextLengthError, EngineError
from engine.kv.block_hash import model_fingerprint, weights_digest
from engine.kv.document_cache import DocumentCache
from engine.kv.paged_cache import PagedKVCache
from engine.kv.prefix_cache import PrefixCache
from engine.runner.forward_context import Capture
from engine.runner.model_runner import ModelRunner

log = logging.getLogger(__name__)

Prompt = str | list[int]
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16,
          "fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


@dataclass
class GenerationOutput:
    prompt: str | None
    prompt_token_ids: list[int]
    token_ids: list[int]
    text: str
    finish_reason: str  # "eos" | "stop" | "length"
    cached_tokens: int = 0  # prompt tokens whose K/V came from the prefix cache
    metrics: dict = field(default_factory=dict)  # ttft_s, itl_mean_s, tokens_per_s, ...


@dataclass
class StreamDelta:
    """One step of streaming: the new text and tokens of prompt number `index`."""

    index: int
    text: str
    token_ids: list[int]
    finished: bool = False
    finish_reason: str | None = None


@dataclass
class ScoreOutput:
    token_ids: list[int]  # the continuation's tokens
    tokens: list[str]
    logprobs: list[float]  # log p(token | everything before it)

    @property
    def total(self) -> float:
        return float(sum(self.logprobs))


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


def resolve_device(device: str | torch.device | None) -> torch.device:
    if device is None:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    dev = torch.device(device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise EngineError("device 'cuda' requested but no CUDA GPU is available")
    return dev


def resolve_dtype(dtype: str | torch.dtype | None, device: torch.device) -> torch.dtype:
    if dtype is None:
        return torch.bfloat16 if device.type == "cuda" else torch.float32
    if isinstance(dtype, torch.dtype):
        return dtype
    try:
        return DTYPES[dtype]
    except KeyError:
        raise EngineError(f"unknown dtype {dtype!r} (use float32, bfloat16 or float16)") from None


class LLM:
    """A loaded model with its paged KV cache.

    model: a GGUF file, a local HF folder, or None for the packaged default (Gemma 3 270M).
    scheduler: batching, admission watermark, preemption and prefix caching (SchedulerConfig).
    device: "cpu", "cuda" (or None: CUDA if available). dtype: float32 / bfloat16 / float16
    (None: bfloat16 on CUDA, float32 on CPU). cache: KV cache sizing (CacheConfig).
    backend: attention backend (None: Triton on CUDA, the torch reference elsewhere).
    cuda_graphs: replay decode steps from CUDA graphs (None: on where they can run; engine/runner/cuda_graph.py).
    """

    def __init__(
        self,
        model: str | Path | None = None,
        device: str | torch.device | None = None,
        dtype: str | torch.dtype | None = None,
        cache: CacheConfig | None = None,
        backend: AttentionBackend | None = None,
        max_model_len: int | None = None,
        cuda_graphs: bool | None = None,
        scheduler: SchedulerConfig | None = None,
    ) -> None:
        from engine.model.loader import load_model
        from engine.paths import default_model_path

        self.device = resolve_device(device)
        self.dtype = resolve_dtype(dtype, self.device)
        self.model_path = Path(model) if model is not None else default_model_path()
        self.model, self.config, self.tokenizer = load_model(self.model_path, self.device, self.dtype)
        self.cuda_graphs = cuda_graphs  # None: on for CUDA with the Triton backend (engine/runner/cuda_graph.py)
        self.scheduler_config = scheduler or SchedulerConfig()
        self._init_cache(cache, backend, max_model_len)

    def _init_cache(self, cache: CacheConfig | None, backend: AttentionBackend | None, max_model_len: int | None) -> None:
        self.cache_config = cache or CacheConfig()
        if max_model_len is not None:
            self.cache_config.max_model_len = max_model_len
        self.max_model_len = self.cache_config.max_model_len or self.config.max_position_embeddings
        self.cache_config.max_model_len = self.max_model_len
        self.kv = PagedKVCache(self.config, self.cache_config, self.device, self.dtype)
        self.backend = backend or default_backend(self.device)
        self.runner = ModelRunner(self.model, self.kv, self.backend, self.device)
        from engine.runner.cuda_graph import attach_graphs

        attach_graphs(self.runner, getattr(self, "cuda_graphs", None))
        self._ids = itertools.count()
        self.fingerprint = model_fingerprint(self.config, weights_digest(self.model_path), str(self.dtype))
        self.prefix = PrefixCache(
            self.kv, self.fingerprint, self.cache_config.max_prefill_chunk, cold=self._make_cold_tier()
        )
        self.runner.on_computed = self.prefix.register
        self.sched_counters = SchedulerCounters()
        self.fallbacks = 0  # requests served through a fallback strategy (generate_long)
        self._occupancy = [0, 0]  # [tokens stored, slots allocated] of finished requests' tables
        self.doc_cache = DocumentCache(self)  # document reuse at any position (engine/kv/document_cache.py)
        self._doc_store = None  # its own host store when no cold tier is configured (doc_tier)

    def clear_prefix_cache(self) -> None:
        """Drop every reusable prefix block held on the device (the cold tier stays)."""
        self.prefix.clear()

    def _make_cold_tier(self):
        c = self.cache_config
        if not c.host_cache_bytes and not c.disk_cache_dir:
            return None
        from engine.kv.cold.disk_store import DiskStore
        from engine.kv.cold.host_store import HostStore
        from engine.kv.cold.tier import ColdTier

        host = HostStore(c.host_cache_bytes, pin=self.device.type == "cuda") if c.host_cache_bytes else None
        disk = DiskStore(Path(c.disk_cache_dir), c.disk_cache_bytes) if c.disk_cache_dir else None
        if host is None and disk is None:
            return None
        return ColdTier(host, disk, write_through=True)

    # ------------------------------------------------------------------ tokens
    def _need_tokenizer(self) -> None:
        if self.tokenizer is None:
            raise EngineError("this model has no tokenizer; pass prompts as lists of token ids")

    def encode(self, prompt: Prompt, add_special_tokens: bool = True) -> list[int]:
        if isinstance(prompt, str):
            self._need_tokenizer()
            return self.tokenizer.encode(prompt, add_special_tokens=add_special_tokens)
        return [int(t) for t in prompt]

    def _decode(self, ids: list[int], skip_special: bool = True) -> str:
        return self.tokenizer.decode(ids, skip_special_tokens=skip_special) if self.tokenizer is not None else ""

    def _check_len(self, n: int, what: str = "prompt") -> None:
        if n > self.max_model_len:
            raise ContextLengthError(
                f"{what} is {n} tokens, longer than the configured context of {self.max_model_len} tokens (max_model_len)"
            )
        if n > self.kv.max_tokens_per_seq():
            raise CacheFullError(
                f"{what} is {n} tokens but the KV cache holds at most {self.kv.max_tokens_per_seq()} tokens per "
                "sequence; raise the cache memory budget"
            )

    # ------------------------------------------------------------------ generation
    def generate(
        self, prompts: Prompt | Seq[Prompt], params: SamplingParams | None = None
    ) -> list[GenerationOutput]:
        """Generate for one prompt or a batch (strings or token-id lists); one output per prompt."""
        seqs = self._make_seqs(prompts, params)
        for _ in self._run(seqs):
            pass
        return [self._output(s) for s in seqs]

    def stream(self, prompts: Prompt | Seq[Prompt], params: SamplingParams | None = None) -> Iterator[StreamDelta]:
        """Generate, yielding text/token deltas as they are produced (`index` says which prompt)."""
        seqs = self._make_seqs(prompts, params)
        yield from self._run(seqs)

    def chat(self, messages: list[dict], params: SamplingParams | None = None) -> GenerationOutput:
        """Generate a reply to chat `messages` rendered with the model's chat template."""
        self._need_tokenizer()
        text = self.tokenizer.apply_chat_template(messages, add_generation_prompt=True)
        ids = self.tokenizer.encode(text, add_special_tokens=False)
        seqs = self._make_seqs([ids], params)
        seqs[0].prompt = text
        for _ in self._run(seqs):
            pass
        return self._output(seqs[0])

    def _output(self, s: Sequence) -> GenerationOutput:
        return GenerationOutput(
            s.prompt, s.prompt_ids, list(s.output_ids), s.text, s.finish_reason or "length",
            cached_tokens=s.cached_tokens, metrics=s.metrics(),
        )

    def _make_seqs(self, prompts: Prompt | Seq[Prompt], params: SamplingParams | None) -> list[Sequence]:
        params = params or SamplingParams()
        if isinstance(prompts, str) or (isinstance(prompts, list) and prompts and isinstance(prompts[0], int)):
            prompts = [prompts]
        seqs = []
        for p in prompts:
            ids = self.encode(p)
            if not ids:
                raise EngineError("empty prompt")
            self._check_len(len(ids))
            seqs.append(self._new_seq(ids, params, p if isinstance(p, str) else None))
        return seqs

    def _new_seq(self, ids: list[int], params: SamplingParams, text: str | None) -> Sequence:
        """A request's sequence, with its own seeded generator when it samples."""
        gen = None
        if not params.greedy:
            gen = torch.Generator().manual_seed(
                params.seed if params.seed is not None else int(torch.randint(0, 2**62, (1,)))
            )
        return Sequence(next(self._ids), ids, params, text, generator=gen)

    def _run(self, seqs: list[Sequence]) -> Iterator[StreamDelta]:
        """Drive the scheduler until every sequence has finished; yield a delta per new token.
        Identical deterministic requests (same tokens, same greedy or seeded params) are computed
        once and their results copied to every duplicate."""
        index: dict[int, int] = {s.seq_id: i for i, s in enumerate(seqs)}
        unique: dict[tuple, Sequence] = {}
        copies: dict[int, list[Sequence]] = {}
        sched = Scheduler(
            self.kv, self.scheduler_config, self.cache_config.max_num_seqs, self.cache_config.max_prefill_chunk,
            prefix=self.prefix if self.scheduler_config.prefix_caching else None,
        )
        sched.counters = self.sched_counters
        sched.on_place = self._place_document
        now = time.perf_counter()
        for s in seqs:
            s.arrival = now
            if self._finish_if_done(s):
                continue
            deterministic = s.params.greedy or s.params.seed is not None
            key = (tuple(s.prompt_ids), repr(s.params)) if deterministic and s.doc is None else None  # placed docs approximate
            if key is not None and key in unique:
                copies.setdefault(unique[key].seq_id, []).append(s)
                continue
            if key is not None:
                unique[key] = s
            sched.add(s)
        eos = set(self.config.eos_token_ids)
        try:
            while sched.has_work:
                batch = sched.schedule()
                hidden = self.runner.forward(batch.prefills, batch.decodes)
                rows, stepped = [], []
                off = 0
                for s, n in batch.prefills:
                    off += n
                    if s.num_cached == s.num_tokens:  # the prompt is complete: sample its first token
                        rows.append(off - 1)
                        stepped.append(s)
                for i, s in enumerate(batch.decodes):
                    rows.append(off + i)
                    stepped.append(s)
                for s in [p for p, _ in batch.prefills] + batch.decodes:
                    self.kv.demote(s.tables, s.num_cached)
                if not stepped:
                    continue
                logits = self.model.logits(hidden[rows])
                toks = sample_batch(logits, [s.params for s in stepped],  # all_ids copies O(context): only if used
                                    [s.all_ids if s.params.repetition_penalty != 1.0 else [] for s in stepped],
                                    [s.generator for s in stepped])
                t = time.perf_counter()
                for s, tok in zip(stepped, toks, strict=True):
                    s.output_ids.append(tok)
                    if s.first_token_time is None:
                        s.first_token_time = t
                    s.token_times.append(t)
                    self._update_text(s, tok, eos)
                    delta = self._delta(s)
                    for c in [s] + copies.get(s.seq_id, []):
                        if c is not s:
                            self._copy_state(s, c)
                        yield StreamDelta(index[c.seq_id], delta, [tok], s.finished, s.finish_reason)
                    if s.finished:
                        self._record_occupancy(s)
                        sched.finish(s)
        finally:
            sched.abort_all()

    @staticmethod
    def _copy_state(src: Sequence, dst: Sequence) -> None:
        dst.output_ids = list(src.output_ids)
        dst.text, dst.emitted, dst.finish_reason = src.text, src.emitted, src.finish_reason
        dst.cached_tokens, dst.first_token_time, dst.token_times = src.cached_tokens, src.first_token_time, list(src.token_times)

    def _finish_if_done(self, s: Sequence) -> bool:
        if s.params.max_tokens == 0:
            s.finish_reason = "length"
            return True
        return False

    def _update_text(self, s: Sequence, tok: int, eos: set[int]) -> None:
        p = s.params
        if (tok in eos and not p.ignore_eos) or tok in p.stop_token_ids:
            s.finish_reason = "eos" if tok in eos else "stop"
        s.text = self._decode(s.output_ids, p.skip_special_tokens)
        if p.stop and s.text:
            hits = [(s.text.find(st), st) for st in p.stop if st in s.text]
            if hits:
                cut = min(h for h, _ in hits)
                s.text = s.text[:cut]
                s.finish_reason = "stop"
        if not s.finished and (len(s.output_ids) >= p.max_tokens or s.num_tokens >= self.max_model_len):
            s.finish_reason = "length"

    def _delta(self, s: Sequence) -> str:
        """New streamable text: hold back an incomplete UTF-8 tail and a possible stop-string prefix."""
        text = s.text
        end = len(text)
        if not s.finished:
            while end > s.emitted and text[end - 1] == "\ufffd":
                end -= 1
            hold = max((len(st) - 1 for st in s.params.stop), default=0)
            end = max(s.emitted, end - hold)
        out = text[s.emitted : end]
        s.emitted = end
        return out

    # ------------------------------------------------------------------ prefill helper
    def _free_seq(self, seq: Sequence) -> None:
        self.kv.free(seq.tables)
        self.prefix.release(seq)

    def _prefill_collect(
        self, ids: list[int], rows_from: int, capture_layers: set[int] | None = None
    ) -> tuple[Sequence, torch.Tensor, list[Capture]]:
        """Prefill `ids` as a temporary sequence in chunks; return the final hidden states of positions
        rows_from.. and the attention captures of those positions. The caller frees the sequence."""
        self._check_len(len(ids))
        seq = Sequence(next(self._ids), ids, SamplingParams(max_tokens=0))
        seq.tables = self.kv.new_tables()
        seq.rope_seq_len = len(ids)
        need = self.kv.blocks_needed(len(ids))
        if any(n > f for n, f in zip(need, self.kv.num_free(), strict=True)):
            self._free_seq(seq)
            raise CacheFullError(f"KV cache has no room for {len(ids)} tokens; raise the cache memory budget")
        hiddens, captures = [], []
        chunk = self.cache_config.max_prefill_chunk
        try:
            while seq.prefilling:
                start = seq.num_cached
                n = min(chunk, len(ids) - start)
                lo = max(rows_from - start, 0)
                cap = None
                if capture_layers is not None and start + n > rows_from:
                    cap = Capture(capture_layers, slice(lo, n))
                h = self.runner.forward([(seq, n)], [], capture=cap)
                self.kv.demote(seq.tables, seq.num_cached if capture_layers is None else 0)  # attribute() reads hot K
                if start + n > rows_from:
                    hiddens.append(h[lo:])
                if cap is not None:
                    captures.append(cap)
        except BaseException:
            self._free_seq(seq)
            raise
        return seq, torch.cat(hiddens) if hiddens else torch.empty(0), captures

    # ------------------------------------------------------------------ logits
    @torch.inference_mode()
    def prompt_logits(self, prompt: Prompt, chunk: int | None = None, last: int | None = None) -> torch.Tensor:
        """Float32 logits [T, vocab] of every position of `prompt`, or of its `last` positions
        (T * vocab floats: keep T small; generate() computes only the last row). `chunk` overrides
        the prefill chunk size."""
        ids = self.encode(prompt)
        saved = self.cache_config.max_prefill_chunk
        if chunk is not None:
            self.cache_config.max_prefill_chunk = chunk
        try:
            seq, hidden, _ = self._prefill_collect(ids, 0 if last is None else max(0, len(ids) - last))
        finally:
            self.cache_config.max_prefill_chunk = saved
        self._free_seq(seq)
        return self.model.logits(hidden)

    # ------------------------------------------------------------------ scoring
    @torch.inference_mode()
    def score(self, prompt: Prompt, continuation: Prompt) -> ScoreOutput:
        """Log-probabilities of the continuation's tokens given the prompt (and the tokens before them).
        The two are tokenized separately (the prompt with BOS, the continuation without)."""
        p_ids = self.encode(prompt)
        c_ids = self.encode(continuation, add_special_tokens=False)
        if not p_ids or not c_ids:
            raise EngineError("score() needs a non-empty prompt and continuation")
        ids = p_ids + c_ids
        seq, hidden, _ = self._prefill_collect(ids, len(p_ids) - 1)
        self._free_seq(seq)
        hidden = hidden[: len(c_ids)]
        target = torch.tensor(c_ids, device=hidden.device)
        out = []
        for s in range(0, hidden.shape[0], 256):
            lp = torch.log_softmax(self.model.logits(hidden[s : s + 256]), dim=-1)
            out.append(lp.gather(1, target[s : s + 256, None])[:, 0])
        logprobs = torch.cat(out).tolist()
        toks = [self.tokenizer.fast.id_to_token(t) for t in c_ids] if self.tokenizer is not None else [str(t) for t in c_ids]
        return ScoreOutput(c_ids, toks, logprobs)

    # ------------------------------------------------------------------ attribution
    @torch.inference_mode()
    def attribute(self, prompt: str, answer: Prompt, spans: list[tuple[int, int]]) -> AttributionOutput:
        """Attention mass that the answer puts on each character span (start, end) of the prompt.

        The prompt and answer run through the model as one sequence. For every answer token we take
        the query of the position that predicts it (the position just before it), and at each
        global-attention layer (sliding-window layers only see nearby text, so they are left out;
        in models without sliding layers every layer is global) its attention probabilities over the prompt
        tokens, p = exp(scale * q.k - lse) with the backend's log-sum-exp. Aggregation:
        mean over query heads, then mean over those layers, then summed over the prompt tokens that
        overlap a span (a token counts for every span it overlaps) and averaged over answer tokens.
        `mass` is that fraction of all attention (the rest goes to other text, BOS and the answer
        itself); `share` renormalises the masses over the given spans so they sum to 1.
        """
        self._need_tokenizer()
        enc = self.tokenizer.encode_with_offsets(prompt)
        a_ids = self.encode(answer, add_special_tokens=False)
        if not a_ids:
            raise EngineError("attribute() needs a non-empty answer")
        p_len = len(enc.ids)
        layers = self.config.global_layers
        if not layers:
            raise EngineError("attribution needs global-attention layers; every layer of this model is sliding-window")
        ids = enc.ids + a_ids
        seq, _, caps = self._prefill_collect(ids, p_len - 1, set(layers))
        try:
            token_mass = torch.zeros(len(a_ids), p_len)
            for layer in layers:
                q = torch.cat([c.q[layer] for c in caps])[: len(a_ids)]  # [A, H, D]
                lse = torch.cat([c.lse[layer] for c in caps])[: len(a_ids)]  # [A, H]
                gi, k_cache, _ = self.kv.layer_cache(layer)
                table = torch.tensor(seq.tables[gi], dtype=torch.long, device=k_cache.device)
                bs = k_cache.shape[1]
                k = k_cache.index_select(0, table[: (p_len + bs - 1) // bs]).flatten(0, 1)[:p_len]  # [P, KVH, D]
                a, h, d = q.shape
                kvh = k.shape[1]
                qg = q.float().reshape(a, kvh, h // kvh, d)  # head i reads kv head i // (h // kvh)
                scores = torch.einsum("akgd,pkd->akgp", qg, k.float()).reshape(a, h, p_len)
                scores = scores * self.config.attn_scale
                if self.config.attn_softcap is not None:
                    cap = self.config.attn_softcap
                    scores = torch.tanh(scores / cap) * cap
                probs = torch.exp(scores - lse.float()[..., None])  # [A, H, P]
                token_mass += probs.mean(1).cpu()
            token_mass /= len(layers)
        finally:
            self._free_seq(seq)
        results, cols = [], []
        for a, b in spans:
            toks = [i for i, (s, e) in enumerate(enc.offsets) if e > s and s < b and e > a]
            t0, t1 = (toks[0], toks[-1] + 1) if toks else (0, 0)
            col = token_mass[:, toks].sum(1) if toks else torch.zeros(len(a_ids))
            cols.append(col)
            results.append(SpanAttribution(a, b, t0, t1, float(col.mean()), 0.0))
        total = sum(r.mass for r in results)
        for r in results:
            r.share = r.mass / total if total > 0 else 0.0
        per_token = torch.stack(cols, 1) if cols else torch.zeros(len(a_ids), 0)
        return AttributionOutput(results, a_ids, layers, per_token)

    # ------------------------------------------------------------------ requests that do not fit
    def generate_long(self, request: object, params: SamplingParams | None = None,
                      fallback: object | None = None) -> tuple[GenerationOutput, object]:
        """Generate for a request that may not fit (a `fallback.LongRequest`, a string or token ids):
        served as `fallback` (a `FallbackPolicy`; default truncate the middle) says; returns the output
        and a `FallbackReport`. See engine/fallback/."""
        from engine.fallback import run_with_fallback

        out, report = run_with_fallback(self, request, fallback, params)
        self.fallbacks += int(bool(getattr(report, "fallback_triggered", False)))
        return out, report

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
        """Engine-wide counters (engine.core.metrics.EngineCounters): blocks in use per tier now (hot and
        warm summed over cache groups; host and disk as block-equivalents: stored bytes over the
        full-precision bytes of one block of every layer), prefix lookups and hits in blocks (device
        and cold tier), swaps, preemptions, fallbacks, the bytes the tier copier moved each way, and
        the fragmentation of finished requests' KV slots."""
        c = EngineCounters()
        tiers = self.kv.blocks_per_tier()
        c.set_blocks("hot", sum(tiers["hot_used"]))
        c.set_blocks("warm", sum(tiers["warm_used"]))
        cold = self.prefix.cold
        if cold is not None:
            g = self.kv.groups[0]
            block_all_layers = 2 * self.kv.block_size * g.k.shape[3] * g.k.shape[4] * g.k.element_size() * self.config.num_layers
            st = cold.stats()
            for tier in ("host", "disk"):
                if st.get(tier):
                    c.set_blocks(tier, int(st[tier]["bytes"]) // block_all_layers)
        ps = self.prefix.stats
        bs = self.kv.block_size
        c.record_prefix_lookup(ps.query_tokens // bs, min(ps.query_tokens // bs, (ps.hit_tokens + ps.cold_hit_tokens) // bs))
        sc = self.sched_counters
        c.swaps_out, c.swaps_in = sc.preempted_swap, sc.swapped_in
        c.preemptions = sc.preempted_swap + sc.preempted_recompute
        c.fallbacks = self.fallbacks
        c.copy_bytes_to_host = self.kv.copier.stats.bytes_to_host
        c.copy_bytes_to_device = self.kv.copier.stats.bytes_to_device
        c.set_occupancy(*self._occupancy)
        return c

    # ------------------------------------------------------------------ document reuse at any position
    def doc_tier(self):
        """The cold tier that stores documents' KV (engine/kv/document_cache.py): the prefix cache's when one
        is configured (CacheConfig.host_cache_bytes / disk_cache_dir; with a disk, a new process
        reuses them), else a host-memory store of its own, made on first use, of min(2 GiB, 1/8 of
        the available host memory)."""
        if self.prefix.cold is not None:
            return self.prefix.cold
        if self._doc_store is None:
            from engine.kv.cold.host_store import HostStore
            from engine.kv.cold.tier import ColdTier
            from engine.kv.paged_cache import free_memory_bytes

            cap = max(64 * 2**20, min(2 * 2**30, free_memory_bytes(torch.device("cpu")) // 8))
            self._doc_store = ColdTier(HostStore(cap, pin=self.device.type == "cuda"), None)
        return self._doc_store

    def _place_document(self, seq: Sequence) -> None:
        """Scheduler hook: the sequence's cached tokens reached its document's offset."""
        offset, doc = seq.doc
        self.doc_cache.place(seq, doc, offset)
        seq.doc = None

    def _document_seq(self, instructions: Prompt, document: Prompt, question: Prompt,
                      params: SamplingParams | None) -> tuple[Sequence, float]:
        params = params or SamplingParams()
        instr = self.encode(instructions)  # a string gets BOS
        doc_ids = self.encode(document, add_special_tokens=False)
        q_ids = self.encode(question, add_special_tokens=False)
        if not doc_ids or not q_ids:
            raise EngineError("generate_with_document needs a non-empty document and question")
        ids = instr + doc_ids + q_ids
        self._check_len(len(ids))
        t0 = time.perf_counter()
        doc = self.doc_cache.get(doc_ids)
        text = instructions + document + question if all(
            isinstance(x, str) for x in (instructions, document, question)) else None
        seq = self._new_seq(ids, params, text)
        seq.doc = (len(instr), doc)
        seq.register_limit = len(instr)  # blocks holding the placed (approximate) document are never indexed
        return seq, t0

    def stream_with_document(self, instructions: Prompt, document: Prompt, question: Prompt,
                             params: SamplingParams | None = None) -> Iterator[StreamDelta]:
        """`generate_with_document`, streamed."""
        seq, _ = self._document_seq(instructions, document, question, params)
        yield from self._run([seq])

    def generate_with_document(self, instructions: Prompt, document: Prompt, question: Prompt,
                               params: SamplingParams | None = None) -> GenerationOutput:
        """Generate for [instructions][document][question] with the document's KV computed once on
        its own ([BOS] + document), kept in `doc_tier()`, and placed behind these instructions with
        its keys re-rotated (engine/kv/document_cache.py). An approximation of `generate` on the same
        tokens: the document did not attend to the instructions (its cost is measured in
        benchmarks/bench_doc_reuse.py). Strings: the instructions are tokenized with BOS, the
        document and the question without special tokens. metrics: ttft_s counts from this call
        (computing or loading the document included), document_s is that part of it."""
        seq, t0 = self._document_seq(instructions, document, question, params)
        offset, doc = seq.doc
        t_doc = time.perf_counter() - t0
        for _ in self._run([seq]):
            pass
        out = self._output(seq)
        if seq.first_token_time is not None:
            out.metrics["ttft_s"] = seq.first_token_time - t0
        out.metrics.update(document_s=t_doc, document_tokens=doc.num_tokens, document_offset=offset,
                           document_loaded=doc.loaded)
        return out

    @torch.inference_mode()
    def document_logits(self, instructions: Prompt, document: Prompt, question: Prompt) -> torch.Tensor:
        """Float32 logits [question tokens, vocab] of the question's positions with the document
        placed as `generate_with_document` places it; `prompt_logits(ids, last=len(question ids))`
        on the same ids is the full recompute to compare with."""
        seq, _ = self._document_seq(instructions, document, question, SamplingParams(max_tokens=0))
        offset = seq.doc[0]
        seq.tables = self.kv.new_tables()
        chunk = self.cache_config.max_prefill_chunk
        hiddens = []
        try:
            while seq.prefilling:  # the scheduler's cuts
                if seq.doc is not None and seq.num_cached == offset:
                    self._place_document(seq)
                    continue
                h = self.runner.forward([(seq, next_prefill_end(seq, chunk) - seq.num_cached)], [])
                self.kv.demote(seq.tables, seq.num_cached)
                if seq.doc is None:
                    hiddens.append(h)
        finally:
            self._free_seq(seq)
        return self.model.logits(torch.cat(hiddens))
