"""`LLM`: the engine's public API — generate (batch and streaming), chat, score, attribute,
requests that do not fit (`generate_long`), and documents reused at any position (`*_with_document`).

`LLM` is a thin facade: it loads the model, sizes the KV cache, and hands requests to the engine core
(engine.core.engine_core: scheduler, model runner, caches), whose steps the output processor
(engine.core.output_processor) turns into text, stream deltas and finish reasons. Scoring
(engine.core.scoring) and attribution (engine.attention.attribution) run the same prefill path
outside the scheduler.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterator
from collections.abc import Sequence as Seq
from pathlib import Path

import torch

from engine.attention.attribution import AttributionOutput, attention_mass, attribute_spans
from engine.attention.backend import AttentionBackend
from engine.attention.triton_backend import default_backend
from engine.config import CacheConfig, EngineConfig, LoadConfig, SchedulerConfig
from engine.core.engine_core import EngineCore
from engine.core.metrics import EngineCounters
from engine.core.output_processor import GenerationOutput, OutputProcessor, StreamDelta
from engine.core.sampling import SamplingParams
from engine.core.scheduler import SchedulerCounters, next_prefill_end, resolve_prefill_chunk
from engine.core.scoring import ScoreOutput, continuation_logprobs
from engine.core.sequence import Sequence
from engine.errors import CacheFullError, EngineError, RequestCancelled
from engine.fallback.planner import FallbackPolicy, FallbackReport, LongRequest, run_with_fallback
from engine.fallback.tools import TextTools
from engine.kv.cold import ColdTier
from engine.kv.document_cache import DocumentCache, DocumentKV
from engine.kv.paged_cache import PagedKVCache
from engine.kv.prefix_cache import PrefixCache
from engine.model.tokenizer import Encoding
from engine.runner.model_runner import ModelRunner

__all__ = ["LLM", "AttributionOutput", "GenerationOutput", "ScoreOutput", "StepProgress", "StreamDelta",
           "resolve_device", "resolve_dtype"]

Prompt = str | list[int]
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16,
          "fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


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


@dataclasses.dataclass(frozen=True)
class StepProgress:
    """Where a call's requests stand after one engine step: prompt tokens whose KV is in place (from a
    cache or computed) of all prompt tokens, output tokens so far of at most `output_tokens_max`,
    and requests finished. Passed to the `on_step` callback of `generate` / `generate_with_document_batch`."""

    prompt_tokens_done: int
    prompt_tokens_total: int
    output_tokens: int
    output_tokens_max: int
    finished: int
    requests: int
    # generate_with_document_batch: "document" while the document's KV is computed (its tokens
    # done so far are counted in prompt_tokens_done too), then "generate"
    phase: str = "generate"
    document_tokens_done: int = 0
    document_tokens_total: int = 0

    @property
    def tokens_done(self) -> int:
        return self.prompt_tokens_done + self.output_tokens

    @property
    def tokens_total(self) -> int:
        """Prompt tokens plus every request's max_tokens (an upper bound: requests may stop earlier)."""
        return self.prompt_tokens_total + self.output_tokens_max


OnStep = Callable[[StepProgress], bool | None]


def step_progress(seqs: list[Sequence]) -> StepProgress:
    """The progress of `seqs` now; a finished request counts its output as complete."""
    done = total = out = out_max = fin = 0
    for s in seqs:
        n = len(s.prompt_ids)
        total += n
        out_max += s.params.max_tokens
        if s.finished:
            done += n
            out += s.params.max_tokens
            fin += 1
        else:
            done += min(s.num_cached, n)
            out += len(s.output_ids)
    return StepProgress(done, total, out, out_max, fin, len(seqs))


class LLM:
    """A loaded model with its paged KV cache, served by one engine core.

    model: a GGUF file, a local HF folder, or None for the packaged default (Gemma 3 270M).
    device: "cpu", "cuda" (or None: CUDA if available). dtype: float32 / bfloat16 / float16
    (None: bfloat16 on CUDA, float32 on CPU). cache: KV cache sizing and tiers (CacheConfig).
    scheduler: sequence limits (max_num_seqs, max_model_len, max_prefill_chunk), batching,
    admission watermark, preemption and prefix caching (SchedulerConfig). max_model_len: shorthand
    for the scheduler's. cuda_graphs: replay decode steps from CUDA graphs (None: on where they can
    run; engine/runner/cuda_graph.py). config: all of these at once (an EngineConfig), instead of
    model / device / dtype / cache / scheduler / max_model_len / cuda_graphs.
    backend: attention backend (None: Triton on CUDA, the torch reference elsewhere).
    `engine_config` is the resolved configuration (max_model_len filled in); read-only.
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
        config: EngineConfig | None = None,
        tensor_parallel_size: int | None = None,
    ) -> None:
        from engine.kv.block_hash import model_fingerprint, weights_digest
        from engine.model.loader import load_model
        from engine.paths import default_model_path

        if config is None:
            sched = scheduler or SchedulerConfig()
            if max_model_len is not None:
                sched = dataclasses.replace(sched, max_model_len=max_model_len)
            config = EngineConfig(LoadConfig(model, device, dtype, cuda_graphs,
                                             tensor_parallel_size=tensor_parallel_size or 1),
                                  cache or CacheConfig(), sched)
        elif any(x is not None for x in (model, device, dtype, cache, max_model_len, cuda_graphs, scheduler,
                                         tensor_parallel_size)):
            raise EngineError("pass either config=EngineConfig(...) or the separate settings, not both")
        load = config.load
        if config.cache.disk_cache_dir:  # before minutes of loading: a cache path that is a file
            from engine.kv.cold.disk_store import check_cache_dir

            check_cache_dir(config.cache.disk_cache_dir)
        self.device = resolve_device(load.device)
        self.dtype = resolve_dtype(load.dtype, self.device)
        self.model_path = Path(load.model) if load.model is not None else default_model_path()
        from engine.model.quant import default_weights

        self.weights = default_weights(load.weights, self.device, load.model is None, load.dtype is not None)
        world = load.tensor_parallel_size
        self.tp = None
        if world < 1:
            raise EngineError(f"tensor_parallel_size must be at least 1, not {world}")
        if world > 1:
            self._check_tp(config, world)
            from engine.parallel import runner as tp_runner

            config = dataclasses.replace(config, load=dataclasses.replace(load, cuda_graphs=False))
            self.model, self.config, self.tokenizer, self.tp, workers = tp_runner.start(
                self.model_path, self.device, self.dtype, self.weights, world, load.tp_check)
            if self.device.type == "cuda":
                self.device = tp_runner.rank_device(self.device, 0)
        else:
            self.model, self.config, self.tokenizer = load_model(self.model_path, self.device, self.dtype, self.weights)
        self.max_model_len = config.scheduler.max_model_len or self.config.max_position_embeddings
        chunk = resolve_prefill_chunk(config.scheduler, config.cache, self.config, self.device,
                                      torch.tensor([], dtype=self.dtype).element_size())
        self.engine_config = dataclasses.replace(config, scheduler=dataclasses.replace(
            config.scheduler, max_model_len=self.max_model_len, max_prefill_chunk=chunk))
        try:
            self.kv = PagedKVCache(self.model.config, self.cache_config, self.device, self.dtype,
                                   self.scheduler_config)
        except BaseException:
            if self.tp is not None:  # the worker ranks wait for the pools' sizing: stop them
                for p in workers:
                    p.kill()
                self.tp.close()
            raise
        runner = None
        if self.tp is not None:
            tp_runner.finish(self.tp, self.cache_config, self.kv.budget_bytes, self.scheduler_config)
        self.backend = backend or default_backend(self.device, self.weights)
        self.fingerprint = model_fingerprint(self.config, weights_digest(self.model_path),
                                             str(self.dtype) + ("" if self.weights == "float" else f"/{self.weights}")
                                             + ("" if self.kv.dtype == self.dtype else f"/kv {self.kv.dtype}"))
        self.output = OutputProcessor(self.tokenizer, self.config.eos_token_ids, self.max_model_len)
        if self.tp is not None:
            runner = tp_runner.TPModelRunner(self.model, self.kv, self.backend, self.device, tp=self.tp,
                                             workers=workers, check=load.tp_check)
        self.core = EngineCore(self.model, self.kv, self.backend, self.device, self.engine_config,
                               self.fingerprint, self.output, runner=runner)
        self.fallbacks = 0  # requests served through a fallback strategy (generate_long)

    @staticmethod
    def _check_tp(config: EngineConfig, world: int) -> None:
        """What a tensor-parallel engine does not do yet, refused before anything loads."""
        if config.cache.host_cache_bytes or config.cache.disk_cache_dir:
            raise EngineError("the cold KV tier (host_cache_bytes, disk_cache_dir) is not supported with "
                              f"tensor_parallel_size={world} yet")
        dev = resolve_device(config.load.device)
        if dev.type == "cuda" and torch.cuda.device_count() < world:
            raise EngineError(f"tensor_parallel_size={world} needs {world} GPUs; {torch.cuda.device_count()} visible")

    def close(self) -> None:
        """Stop a tensor-parallel engine's worker ranks (a no-op for one rank); the LLM is unusable after."""
        if self.tp is not None:
            self.core.runner.close()

    def __enter__(self) -> LLM:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ------------------------------------------------------------------ configuration and the core's parts
    @property
    def cache_config(self) -> CacheConfig:
        return self.engine_config.cache

    @property
    def scheduler_config(self) -> SchedulerConfig:
        return self.engine_config.scheduler

    @property
    def runner(self) -> ModelRunner:
        return self.core.runner

    @property
    def prefix(self) -> PrefixCache:
        return self.core.prefix

    @property
    def doc_cache(self) -> DocumentCache:
        """Document reuse at any position (engine/kv/document_cache.py)."""
        return self.core.documents

    @property
    def sched_counters(self) -> SchedulerCounters:
        return self.core.scheduler.counters

    def clear_prefix_cache(self) -> None:
        """Drop every reusable prefix block held on the device (the cold tier stays)."""
        self.prefix.clear()

    # ------------------------------------------------------------------ tokens
    def _need_tokenizer(self) -> None:
        if self.tokenizer is None:
            raise EngineError("this model has no tokenizer; pass prompts as lists of token ids")

    def encode(self, prompt: Prompt, add_special_tokens: bool = True) -> list[int]:
        if isinstance(prompt, str):
            self._need_tokenizer()
            return self.tokenizer.encode(prompt, add_special_tokens=add_special_tokens)
        return list(map(int, prompt))

    def decode(self, ids: list[int], skip_special: bool = True) -> str:
        """Text of token ids ("" for a model without a tokenizer)."""
        return self.output.decode(ids, skip_special)

    def check_len(self, n: int, what: str = "prompt") -> None:
        """Raise ContextLengthError / CacheFullError when a sequence of `n` tokens cannot run."""
        self.core.check_len(n, what)

    # ------------------------------------------------------------------ generation
    def generate(
        self, prompts: Prompt | Seq[Prompt], params: SamplingParams | None = None, on_step: OnStep | None = None
    ) -> list[GenerationOutput]:
        """Generate for one prompt or a batch (strings or token-id lists); one output per prompt.
        on_step(StepProgress) runs after every engine step; when it returns True the requests that
        have not finished stop there with finish_reason "abort" (the finished ones are kept)."""
        seqs = self._make_seqs(prompts, params)
        for _ in self._run(seqs, on_step):
            pass
        return [self.output.output(s) for s in seqs]

    def generate_shared(self, head: Prompt, suffixes: Seq[Prompt], params: SamplingParams | None = None,
                        on_step: OnStep | None = None) -> list[GenerationOutput]:
        """One output per suffix for the prompts head + suffix, the head's KV computed once and
        shared by reference (the same blocks in every request's table, no copies) by the whole batch.

        The head's full blocks are computed first (a one-token request that cuts its prefill at the
        last block boundary of the head, which the prefix cache indexes), then every request is
        submitted together with the same cut (`Sequence.prefill_cut`): each takes the head's blocks
        from the prefix cache, computes only its last partial block and its suffix, and the
        scheduler batches the decodes. Because every request cuts its prefill there, a request's
        logits are bit-identical to the same request computed alone from scratch with that cut. The head is
        tokenized on its own (a string gets BOS) and each suffix without special tokens, so every
        prompt starts with exactly the head's token ids. on_step: as `generate`'s, over the head
        (phase "document", the head's tokens counted as prompt tokens done) and then the batch;
        True during the head raises RequestCancelled."""
        return self.generate_shared_batch([(head, suffixes)], params, on_step)[0]

    def generate_shared_batch(self, groups: Seq[tuple[Prompt, Seq[Prompt]]], params: SamplingParams | None = None,
                              on_step: OnStep | None = None) -> list[list[GenerationOutput]]:
        """`generate_shared` for several heads at once (several documents, each with its questions):
        the heads are computed together (their prefill chunks batched), then every request of every
        group is submitted together, so decodes are batched across documents too. One list of
        outputs per group. The heads must fit the KV pool together (they wait in the prefix cache
        until their requests take them; a head evicted before that is recomputed, not lost). Each
        output's metrics["ttft_s"] counts from the call's start (the shared heads included) and
        metrics["head_s"] is the time spent computing the heads before the requests started."""
        params = params or SamplingParams()
        t0 = time.perf_counter()
        bs = self.kv.block_size
        plan = []  # (prompts, cut) per group
        for head, suffixes in groups:
            head_ids = self.encode(head)
            suffix_ids = [self.encode(x, add_special_tokens=False) if isinstance(x, str) else list(x) for x in suffixes]
            prompts = [head_ids + x for x in suffix_ids]
            for p in prompts:
                self.check_len(len(p))
            # every request cuts there, a lone one too: a later call over the same head resumes there
            plan.append((prompts, (len(head_ids) // bs) * bs if self.core.scheduler.prefix_caching else 0))
        primes = []
        for prompts, cut in plan:
            if len(prompts) > 1 and cut:  # a lone request computes its head itself
                prime = self.core.new_sequence(prompts[0][: cut + 1], SamplingParams(max_tokens=1), None)
                prime.prefill_cut = cut
                primes.append(prime)
        if primes:
            total = sum(len(p) for prompts, _ in plan for p in prompts)
            n_req = sum(len(prompts) for prompts, _ in plan)
            heads_total = sum(p.prefill_cut for p in primes)
            stopped = []

            def on_head(_p: StepProgress) -> bool | None:
                done = sum(min(p.num_cached, p.prefill_cut) for p in primes)
                stop = on_step(StepProgress(done, total, 0, params.max_tokens * n_req, 0, n_req, phase="document",
                                            document_tokens_done=done, document_tokens_total=heads_total))
                if stop:
                    stopped.append(True)
                return stop

            for _ in self._run(primes, on_head if on_step is not None else None):
                pass
            if stopped:  # also when the heads' last step finished them
                raise RequestCancelled("stopped while computing the shared head")
        seqs, out_groups = [], []
        for (head, suffixes), (prompts, cut) in zip(groups, plan, strict=True):
            group = []
            for p, suf in zip(prompts, suffixes, strict=True):
                s = self.core.new_sequence(p, params, head + suf if isinstance(head, str) and isinstance(suf, str) else None)
                s.prefill_cut = cut
                group.append(s)
            seqs += group
            out_groups.append(group)
        t_head = time.perf_counter() - t0
        for _ in self._run(seqs, on_step):
            pass
        outs = []
        for group in out_groups:
            outs.append([])
            for s in group:
                out = self.output.output(s)
                if s.first_token_time is not None:  # from the call's start: the shared head is waited for too
                    out.metrics["ttft_s"] = s.first_token_time - t0
                out.metrics["head_s"] = t_head
                outs[-1].append(out)
        return outs

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
        return self.output.output(seqs[0])

    def _make_seqs(self, prompts: Prompt | Seq[Prompt], params: SamplingParams | None) -> list[Sequence]:
        params = params or SamplingParams()
        if isinstance(prompts, str) or (isinstance(prompts, list) and prompts and isinstance(prompts[0], int)):
            prompts = [prompts]
        seqs = []
        for p in prompts:
            ids = self.encode(p)
            if not ids:
                raise EngineError("empty prompt")
            self.check_len(len(ids))
            seqs.append(self.core.new_sequence(ids, params, p if isinstance(p, str) else None))
        return seqs

    def _run(self, seqs: list[Sequence], on_step: OnStep | None = None) -> Iterator[StreamDelta]:
        """Add the sequences to the engine core and step it until every one has finished; yield a
        delta per new token. Identical deterministic requests (same tokens, same greedy or seeded
        params) are computed once and their results copied to every duplicate. on_step: called with
        the progress of `seqs` after every step; True stops the unfinished ones ("abort")."""
        index: dict[int, int] = {s.seq_id: i for i, s in enumerate(seqs)}
        unique: dict[tuple, Sequence] = {}
        copies: dict[int, list[Sequence]] = {}
        added: list[Sequence] = []
        now = time.perf_counter()
        for s in seqs:
            s.arrival = now
            if self.output.finish_if_empty(s):
                continue
            deterministic = s.params.greedy or s.params.seed is not None
            key = (tuple(s.prompt_ids), repr(s.params)) if deterministic and s.doc is None else None  # placed docs approximate
            if key is not None and key in unique:
                copies.setdefault(unique[key].seq_id, []).append(s)
                continue
            if key is not None:
                unique[key] = s
            added.append(s)
        try:
            for s in added:
                self.core.add_request(s)
            while any(not s.finished for s in added) and self.core.has_unfinished():
                for out in self.core.step():
                    s = out.seq
                    if s.seq_id not in index:
                        continue  # another call's request, stepped along with these
                    for c in [s] + copies.get(s.seq_id, []):
                        if c is not s:
                            self.output.copy_state(s, c)
                        yield StreamDelta(index[c.seq_id], out.text, [out.token], s.finished, s.finish_reason)
                if on_step is not None and on_step(step_progress(seqs)):
                    for s in seqs:
                        if not s.finished:
                            s.finish_reason = "abort"
                    break
        finally:
            for s in added:
                self.core.abort(s)

    # ------------------------------------------------------------------ logits
    @torch.inference_mode()
    def prompt_logits(self, prompt: Prompt, chunk: int | None = None, last: int | None = None) -> torch.Tensor:
        """Float32 logits [T, vocab] of every position of `prompt`, or of its `last` positions
        (T * vocab floats: keep T small; generate() computes only the last row). `chunk` overrides
        the prefill chunk size."""
        ids = self.encode(prompt)
        seq, hidden, _ = self.core.prefill_collect(ids, 0 if last is None else max(0, len(ids) - last), chunk=chunk)
        self.core.free(seq)
        return self.model.logits(hidden)

    # ------------------------------------------------------------------ scoring
    @torch.inference_mode()
    def score(self, prompt: Prompt, continuation: Prompt) -> ScoreOutput:
        """Log-probabilities of the continuation's tokens given the prompt (and the tokens before them).
        The two are tokenized separately (the prompt with BOS, the continuation without)."""
        return self.score_many([(prompt, continuation)])[0]

    @torch.inference_mode()
    def score_many(self, items: Seq[tuple[Prompt, Prompt]], batch: int = 32) -> list[ScoreOutput]:
        """`score` for several (prompt, continuation) pairs, `batch` pairs per forward
        (`EngineCore.prefill_collect_many`: their tokens packed into shared prefill steps, nothing
        taken from or left in the prefix cache; pairs the pool cannot hold together go in halves).
        A pair alone is exactly `score`; in a batch the forward rounds differently (issue 47:
        bit-identity across batch composition is not yet held)."""
        prepared = []
        for prompt, continuation in items:
            p_ids = self.encode(prompt)
            c_ids = self.encode(continuation, add_special_tokens=False)
            if not p_ids or not c_ids:
                raise EngineError("score() needs a non-empty prompt and continuation")
            prepared.append((p_ids, c_ids))
        return self._score_prepared(prepared, max(1, batch))

    def _score_prepared(self, prepared: list[tuple[list[int], list[int]]], batch: int) -> list[ScoreOutput]:
        outs: list[ScoreOutput] = []
        for lo in range(0, len(prepared), batch):
            part = prepared[lo : lo + batch]
            try:
                runs = self.core.prefill_collect_many([(p + c, len(p) - 1) for p, c in part])
            except CacheFullError:  # the pool cannot hold these together: halves, down to one at a time
                if len(part) == 1:
                    raise
                outs += self._score_prepared(part, max(1, len(part) // 2))
                continue
            try:
                for (_, c_ids), (_, hidden, _) in zip(part, runs, strict=True):
                    logprobs = continuation_logprobs(self.model.logits, hidden[: len(c_ids)], c_ids)
                    toks = ([self.tokenizer.fast.id_to_token(t) for t in c_ids] if self.tokenizer is not None
                            else [str(t) for t in c_ids])
                    outs.append(ScoreOutput(c_ids, toks, logprobs))
            finally:
                for seq, _, _ in runs:
                    self.core.free(seq)
        return outs

    # ------------------------------------------------------------------ attribution
    @torch.inference_mode()
    def attribute(self, prompt: str | tuple[str, str], answer: Prompt, spans: list[tuple[int, int]]) -> AttributionOutput:
        """Attention mass that the answer puts on each character span (start, end) of the prompt:
        prompt and answer run through the model as one sequence, and each answer token's attention
        over the prompt at the global-attention layers is summed per span (engine/attention/attribution.py).
        The prompt's KV comes from the prefix cache as far as it holds it (a document the answer's
        batch just read is not computed again); only the rest and the answer are computed. A prompt
        given as (head, suffix) is tokenized as `generate_shared` tokenizes it (the head with BOS, the
        suffix without special tokens), so the answer is attributed over the very tokens it was
        generated from; spans then index head + suffix."""
        return self.attribute_many([(prompt, answer, spans)])[0]

    @torch.inference_mode()
    def attribute_many(self, items: Seq[tuple[str | tuple[str, str], Prompt, list[tuple[int, int]]]],
                       batch: int = 64) -> list[AttributionOutput]:
        """`attribute` for several (prompt, answer, spans) at once, in one forward per `batch`
        items (`EngineCore.prefill_collect_many`: each prompt's cached prefix taken from the prefix
        cache, the remainders and answers computed together), a head shared by several items
        tokenized once. A batch the pool cannot hold together runs one item at a time."""
        self._need_tokenizer()
        layers = self.config.global_layers
        if not layers:
            raise EngineError("attribution needs global-attention layers; every layer of this model is sliding-window")
        heads: dict[str, Encoding] = {}
        prepared = []  # (prompt ids, offsets, answer ids, spans)
        for prompt, answer, spans in items:
            if isinstance(prompt, tuple):
                head, suffix = prompt
                if head not in heads:
                    heads[head] = self.tokenizer.encode_with_offsets(head)
                h = heads[head]
                tail = self.tokenizer.encode_with_offsets(suffix, add_special_tokens=False)
                shift = len(head)
                ids, offsets = h.ids + tail.ids, h.offsets + [(a + shift, b + shift) for a, b in tail.offsets]
            else:
                enc = self.tokenizer.encode_with_offsets(prompt)
                ids, offsets = enc.ids, enc.offsets
            a_ids = self.encode(answer, add_special_tokens=False) if isinstance(answer, str) else list(answer)
            if not a_ids:
                raise EngineError("attribute() needs a non-empty answer")
            prepared.append((ids, offsets, a_ids, spans))
        outs: list[AttributionOutput] = []
        for lo in range(0, len(prepared), max(1, batch)):
            part = prepared[lo : lo + max(1, batch)]
            try:
                runs = self.core.prefill_collect_many([(ids + a, len(ids) - 1) for ids, _, a, _ in part], set(layers),
                                                      reuse=True)
            except CacheFullError:
                if len(part) == 1:
                    raise
                for item in part:
                    outs += self._attribute_runs([item], self.core.prefill_collect_many(
                        [(item[0] + item[2], len(item[0]) - 1)], set(layers), reuse=True), layers)
                continue
            outs += self._attribute_runs(part, runs, layers)
        return outs

    def _attribute_runs(self, part: list, runs: list, layers: list[int]) -> list[AttributionOutput]:
        try:
            return [attribute_spans(attention_mass(self.config, self.kv, seq.tables, caps, layers, len(ids), len(a_ids),
                                                   tp=self.tp),
                                    offsets, spans, a_ids, layers)
                    for (ids, offsets, a_ids, spans), (seq, _, caps) in zip(part, runs, strict=True)]
        finally:
            for seq, _, _ in runs:
                self.core.free(seq)
            if self.tp is not None:
                self.core.runner.forget_captures()

    # ------------------------------------------------------------------ requests that do not fit
    def generate_long(self, request: LongRequest | str | list[int], params: SamplingParams | None = None,
                      fallback: FallbackPolicy | None = None,
                      text_tools: TextTools | None = None) -> tuple[GenerationOutput, FallbackReport]:
        """Generate for a request that may not fit (a `LongRequest`, a string or token ids): served
        as `fallback` (a `FallbackPolicy`; default truncate the middle) says; returns the output and
        a `FallbackReport`. `text_tools` (a `TextTools`) score retrieval chunks and measure
        key-entity retention; retrieval needs them. See engine/fallback/."""
        out, report = run_with_fallback(self, request, fallback, params, text_tools)
        self.fallbacks += int(report.fallback_triggered)
        return out, report

    # ------------------------------------------------------------------ observability
    def warmup(self, progress: Callable[[str], None] | None = None) -> int:
        """Do now what a first request would otherwise pay for: one short request (compiles the decode
        kernels and the short-prefill path), on CUDA one prompt of two prefill chunks and a little
        more (the long-prompt path: a full first chunk, a full chunk after it and a short one over
        the paged cache), then a batch of three prompts (several chunks in a step, decode rows beside
        prefill chunks) and, where decode steps replay CUDA graphs, the decode tuning and the graph
        of every batch and context bucket the engine's limits allow (`CudaGraphRunner.capture_all`).
        `progress` gets one line per step. Returns how many graphs were captured."""
        if progress is not None:
            progress("warm-up: compiling kernels")
        self.generate([[1] * 32], SamplingParams(max_tokens=3, ignore_eos=True))
        if self.device.type == "cuda":
            # a long prompt's path: a first chunk of the full prefill size (attention over fresh K/V),
            # a second full chunk over it (fused attention after a prefix: cuDNN compiles its unmasked
            # kernel once per process, ~1 s on an H100) and a short third one (the paged kernel), so
            # a user's first long prompt compiles nothing; one chunk and a short one where the pool
            # or the context is too small for two
            n = 0
            for size in (2 * self.core.chunk + 4 * self.kv.block_size, self.core.chunk + 4 * self.kv.block_size):
                size = min(size, self.max_model_len - 4)
                try:
                    self.check_len(size + 2)
                except EngineError:  # a pool too small for it
                    continue
                n = size
                break
            if n > 32:
                if progress is not None:
                    progress(f"warm-up: a {n:,}-token prefill (the long-prompt path)")
                self.generate([[2] * n], SamplingParams(max_tokens=2, ignore_eos=True))
            # a batch's paths, which a lone prompt never takes: several chunks after a prefix in one
            # step (the varlen kernel: the sliding-window layers' prefill in any batch) and decode
            # rows beside prefill chunks (eager decode launches); without this a user's first batch
            # compiled them (16 x 32K Gemma, H100: its prefill steps 3.8 s against 0.6 s steady;
            # BENCHMARKS.md "The warm tier, first batches and CPU decode")
            # The third prompt's second chunk is short (100 tokens: under the backend's fused-attention
            # minimum), so the global layers' chunks take the varlen kernel too (without a window:
            # another compile, which a user's first batch paid, 2.7 s on an H100)
            m = min(self.core.chunk + 256, self.max_model_len - 8)
            m2 = min(self.core.chunk + 100, m)
            try:
                self.check_len(m + 8)
                fits = True
            except EngineError:  # a pool too small for it
                fits = False
            if fits and self.scheduler_config.max_num_seqs >= 3 and m > 256:
                if progress is not None:
                    progress(f"warm-up: a batch of 3 prompts ({m:,}, {m2:,} and 32 tokens)")
                self.generate([[3] * 32, [4] * m, [5] * m2], SamplingParams(max_tokens=4, ignore_eos=True))
        graphs = getattr(self.runner, "graphs", None)
        return graphs.capture_all(self.scheduler_config.max_num_seqs, progress) if graphs is not None else 0

    def counters(self) -> EngineCounters:
        """Engine-wide counters (engine.core.metrics.EngineCounters; see `EngineCore.counters`) with
        the requests served through a fallback."""
        c = self.core.counters()
        c.fallbacks = self.fallbacks
        return c

    # ------------------------------------------------------------------ document reuse at any position
    def doc_tier(self) -> ColdTier:
        """The cold tier that stores documents' KV (`DocumentCache.store`)."""
        return self.doc_cache.store()

    def _document_seq(self, instructions: Prompt, document: Prompt, question: Prompt,
                      params: SamplingParams | None, doc: DocumentKV | None = None,
                      on_chunk: Callable[[int, int], bool | None] | None = None) -> tuple[Sequence, float]:
        """The request's sequence with `doc` (None: the document's KV, computed or loaded now, with
        `on_chunk` called after each chunk: `DocumentCache.get`) to place."""
        params = params or SamplingParams()
        instr = self.encode(instructions)  # a string gets BOS
        doc_ids = self.encode(document, add_special_tokens=False) if doc is None else doc.token_ids
        q_ids = self.encode(question, add_special_tokens=False)
        if not doc_ids or not q_ids:
            raise EngineError("generate_with_document needs a non-empty document and question")
        ids = instr + doc_ids + q_ids
        self.check_len(len(ids))
        t0 = time.perf_counter()
        doc = doc if doc is not None else self.doc_cache.get(doc_ids, on_chunk)
        text = instructions + document + question if all(
            isinstance(x, str) for x in (instructions, document, question)) else None
        seq = self.core.new_sequence(ids, params, text)
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
        return self.generate_with_document_batch(instructions, document, [question], params)[0]

    def generate_with_document_batch(self, instructions: Prompt, document: Prompt, questions: Seq[Prompt],
                                     params: SamplingParams | None = None,
                                     on_step: OnStep | None = None) -> list[GenerationOutput]:
        """`generate_with_document` for several questions over one document, submitted together: the
        document's KV is computed (or loaded) once, placed into every request, and the scheduler
        batches them. One output per question; metrics as `generate_with_document`'s (ttft_s from
        this call). on_step: as `generate`'s, called after every prefill chunk of the document's KV
        (StepProgress.phase "document", the document's tokens counted as prompt tokens done), once
        the document's KV is ready, and after every engine step; returning True during the
        document stops it there and raises RequestCancelled (nothing stored, blocks freed), later
        it aborts the requests (finish_reason "abort")."""
        if not questions:
            return []
        on_chunk = None
        if on_step is not None:
            p = params or SamplingParams()
            head_n = len(self.encode(instructions)) + len(self.encode(document, add_special_tokens=False))
            prompts_total = sum(head_n + len(self.encode(q, add_special_tokens=False)) for q in questions)

            def on_chunk(done: int, total: int) -> bool | None:
                return on_step(StepProgress(done, prompts_total, 0, p.max_tokens * len(questions), 0, len(questions),
                                            phase="document", document_tokens_done=done, document_tokens_total=total))

        first, t0 = self._document_seq(instructions, document, questions[0], params, on_chunk=on_chunk)
        offset, doc = first.doc
        seqs = [first] + [self._document_seq(instructions, document, q, params, doc)[0] for q in questions[1:]]
        t_doc = time.perf_counter() - t0
        if on_step is not None and on_step(step_progress(seqs)):
            for s in seqs:
                s.finish_reason = "abort"
        else:
            for _ in self._run(seqs, on_step):
                pass
        outs = []
        for seq in seqs:
            out = self.output.output(seq)
            if seq.first_token_time is not None:
                out.metrics["ttft_s"] = seq.first_token_time - t0
            out.metrics.update(document_s=t_doc, document_tokens=doc.num_tokens, document_offset=offset,
                               document_loaded=doc.loaded)
            outs.append(out)
        return outs

    @torch.inference_mode()
    def document_logits(self, instructions: Prompt, document: Prompt, question: Prompt) -> torch.Tensor:
        """Float32 logits [question tokens, vocab] of the question's positions with the document
        placed as `generate_with_document` places it; `prompt_logits(ids, last=len(question ids))`
        on the same ids is the full recompute to compare with."""
        seq, _ = self._document_seq(instructions, document, question, SamplingParams(max_tokens=0))
        offset = seq.doc[0]
        seq.tables = self.kv.new_tables()
        chunk = self.core.chunk
        hiddens = []
        try:
            while seq.prefilling:  # the scheduler's cuts
                if seq.doc is not None and seq.num_cached == offset:
                    self.core.place_document(seq)
                    continue
                h = self.runner.forward([(seq, next_prefill_end(seq, chunk) - seq.num_cached)], [])
                self.kv.demote(seq.tables, seq.num_cached)
                if seq.doc is None:
                    hiddens.append(h)
        finally:
            self.core.free(seq)
        return self.model.logits(torch.cat(hiddens))
