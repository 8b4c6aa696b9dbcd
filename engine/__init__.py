"""The long-context LLM engine: models, loading, paged KV cache, generation, scoring, attribution.

Quick use::

    from engine import LLM, SamplingParams
    llm = LLM()                                   # Gemma 3 270M (packaged GGUF), CPU, float32
    out = llm.generate(["The capital of France is"], SamplingParams(max_tokens=16))
    print(out[0].text)

How one request goes through the engine (engine/README.md has the room map)
----------------------------------------------------------------------------
1. Loading (once, `engine.model.loader`). `LLM(model=...)` reads a GGUF file (`loader.gguf_file`:
   header parsed with numpy, tensors memory-mapped and dequantised by `gguf.quants.dequantize`)
   or a HF folder (config.json + safetensors). The family module
   (`engine.model.families.gemma3|llama|qwen2|qwen3`) turns the metadata into a `ModelConfig`
   (per-layer sliding windows and RoPE) and renames the tensors to HF names;
   `model.decoder.CausalLM` is built on the meta device and the weights are assigned in the chosen
   dtype. The tokenizer comes from tokenizer.json or is rebuilt from the GGUF vocabulary
   (`loader.gguf_tokenizer`, cached under $LONGDOC_CACHE). The paged KV cache
   (`kv.paged_cache.PagedKVCache`) is sized from a memory budget: one block pool per group of
   layers with the same attention span (Gemma 3: global layers, 512-token sliding layers). The
   `EngineConfig` (engine.config) is resolved once and read-only after.
2. Request (`LLM.generate` / `stream` / `chat`). The prompt is tokenized (BOS added by the
   tokenizer's post-processor), checked against max_model_len (ContextLengthError names the limit)
   and becomes a `core.sequence.Sequence`, added to the engine core (`core.engine_core.EngineCore`),
   which owns one scheduler for its life.
3. Scheduling (`core.scheduler.Scheduler.schedule`, once per `EngineCore.step`). Running sequences
   that decode get their next slot first (the newest is preempted, by swap or recompute, when
   blocks run out); prefilling ones get their next chunk (cut on a global grid of
   `max_prefill_chunk` tokens, the prefix cache's unit); waiting ones are admitted while every
   block pool stays under the watermark, their longest cached prefix attached from the prefix
   cache (`kv.prefix_cache`). The plan is a `SchedulerOutput`.
4. Forward (`runner.model_runner.ModelRunner.forward`). The step's prefill chunks and decode tokens
   become one flat batch; the runner allocates cache slots (growing each sequence's block tables)
   and builds a `runner.forward_context.ForwardContext`: slot mapping, block tables, global
   positions. The model embeds the tokens and runs each decoder layer: q/k/v projections, q/k
   norm, RoPE at global positions (so any chunking gives the same result), K/V written into the
   pool, then the attention backend (`attention.backend.AttentionBackend`: the torch reference, or
   `attention.triton_backend` over longdoc_kernels on CUDA). Sliding pools free the blocks their
   window can no longer see; full blocks are indexed for prefix reuse; with a warm tier, blocks
   behind the hot window are demoted to INT8 (`kv.warm_tier`). Only the rows that sample compute
   logits.
5. Sampling and output. `core.sampling.sample_batch` draws one token per row (repetition penalty,
   temperature, top-k, top-p, per-sequence seeded generator; greedy at temperature 0). The output
   processor (`core.output_processor`) detokenizes incrementally, applies stop tokens and strings
   and max_tokens / max_model_len, and yields `StreamDelta`s; a finished sequence's blocks return to
   the pools and `generate` returns a `GenerationOutput` per prompt.

`score` and `attribute` run the same prefill path outside the scheduler
(`EngineCore.prefill_collect`) on prompt + continuation: `score` turns the hidden states of the
continuation's positions into log-probabilities (`core.scoring`); `attribute` captures the queries
and log-sum-exps of the answer's positions at global layers and measures the attention probability
mass on each prompt span (`attention.attribution`). Requests that do not fit go through
`engine.fallback` (`LLM.generate_long`); a document's KV can be computed once and placed behind any
instructions (`kv.document_cache`, `LLM.generate_with_document`).
"""

from engine.config import CacheConfig, EngineConfig, LoadConfig, SchedulerConfig
from engine.core.sampling import SamplingParams
from engine.errors import (
    CacheDirError,
    CacheFullError,
    ContextLengthError,
    EngineError,
    ModelLoadError,
    RequestCancelled,
    UnsupportedModelError,
)
from engine.fallback import (
    FallbackPlan,
    FallbackPolicy,
    FallbackReport,
    LongRequest,
    TextTools,
    fit,
    run_with_fallback,
)
from engine.kv.cold.disk_store import check_cache_dir
from engine.llm import LLM, AttributionOutput, GenerationOutput, ScoreOutput, StepProgress, StreamDelta
from engine.model.loader import has_chat_template
from engine.paths import default_model_path

__all__ = [
    "LLM",
    "SamplingParams",
    "CacheConfig",
    "SchedulerConfig",
    "LoadConfig",
    "EngineConfig",
    "GenerationOutput",
    "StreamDelta",
    "StepProgress",
    "ScoreOutput",
    "AttributionOutput",
    "EngineError",
    "ModelLoadError",
    "UnsupportedModelError",
    "ContextLengthError",
    "CacheFullError",
    "CacheDirError",
    "check_cache_dir",
    "RequestCancelled",
    "LongRequest",
    "FallbackPolicy",
    "FallbackReport",
    "FallbackPlan",
    "TextTools",
    "fit",
    "run_with_fallback",
    "default_model_path",
    "has_chat_template",
]
