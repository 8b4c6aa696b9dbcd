"""The long-context LLM engine: models, loading, paged KV cache, generation, scoring, attribution.

Quick use::

    from engine import LLM, SamplingParams
    llm = LLM()                                   # Gemma 3 270M (packaged GGUF), CPU, float32
    out = llm.generate(["The capital of France is"], SamplingParams(max_tokens=16))
    print(out[0].text)

How one request goes through the engine
---------------------------------------
1. Loading (once, `engine.model.loader`). `LLM(model=...)` reads a GGUF file (`loader.gguf_file`: header
   parsed with numpy, tensors memory-mapped and dequantised by `gguf.quants.dequantize`) or a HF
   folder (config.json + safetensors). The family module (`engine.model.families.gemma3|llama|qwen2|qwen3`)
   turns the metadata into a `ModelConfig` (per-layer sliding windows and RoPE) and renames the
   tensors to HF names; `models.decoder.CausalLM` is built on the meta device and the weights are
   assigned in the chosen dtype. The tokenizer comes from tokenizer.json or is rebuilt from the
   GGUF vocabulary (`loader.gguf_tokenizer`, cached under $LONGDOC_CACHE).
   The paged KV cache (`kv_cache.PagedKVCache`) is sized from a memory budget: one block pool per
   group of layers with the same attention span (Gemma 3: global layers, 512-token sliding layers).
2. Admission (`llm.LLM._run`). The prompt is tokenized (BOS added by the tokenizer's
   post-processor), checked against `max_model_len` (ContextLengthError names the limit) and
   becomes a `sequence.Sequence`. It is admitted when every block pool can reserve the blocks its
   prompt + max_tokens will need (a sliding pool needs only window + chunk tokens per sequence).
3. Prefill, chunk by chunk (`runner.ModelRunner.forward`). For each chunk of at most
   `max_prefill_chunk` tokens the runner allocates cache slots (growing the sequence's block table
   in each pool), and builds a `context.ForwardContext`: slot mapping, block tables, global
   positions. The model embeds the tokens and runs each decoder layer: q/k/v projections, q/k norm,
   RoPE at global positions (so any chunking gives the same result), K/V written into the pool,
   then the attention backend (`attention.AttentionBackend`; `TorchAttentionBackend` gathers the
   visible blocks and calls scaled_dot_product_attention). After the chunk, sliding pools free the
   blocks their window can no longer see. Only the last position's logits are computed.
4. Decode. The first token is sampled from those logits (`sampling.sample_token`: repetition
   penalty, temperature, top-k, top-p, per-sequence seeded generator; greedy at temperature 0).
   Then every running sequence advances together: one token each in one batched forward, the
   backend's `decode` reading each sequence's blocks up to its own length.
5. Finish. A sequence stops at EOS, a stop token or string, max_tokens or max_model_len; its text
   is detokenized incrementally (streaming yields `StreamDelta`s), its blocks return to the free
   lists, and `generate` returns a `GenerationOutput` per prompt.

`score` and `attribute` use the same prefill path on prompt + continuation: `score` turns the
hidden states of the continuation's positions into log-probabilities; `attribute` captures the
queries and log-sum-exps of the answer's positions at global layers and measures the attention
probability mass on each prompt span (see `LLM.attribute` for the aggregation).
"""

from engine.config import CacheConfig, EngineConfig, LoadConfig, SchedulerConfig
from engine.core.sampling import SamplingParams
from engine.errors import (
    CacheFullError,
    ContextLengthError,
    EngineError,
    ModelLoadError,
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
from engine.llm import LLM, AttributionOutput, GenerationOutput, ScoreOutput, StreamDelta

__all__ = [
    "LLM",
    "SamplingParams",
    "CacheConfig",
    "SchedulerConfig",
    "LoadConfig",
    "EngineConfig",
    "GenerationOutput",
    "StreamDelta",
    "ScoreOutput",
    "AttributionOutput",
    "EngineError",
    "ModelLoadError",
    "UnsupportedModelError",
    "ContextLengthError",
    "CacheFullError",
    "LongRequest",
    "FallbackPolicy",
    "FallbackReport",
    "FallbackPlan",
    "TextTools",
    "fit",
    "run_with_fallback",
]
