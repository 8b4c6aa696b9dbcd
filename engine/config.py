"""The engine's configuration: one `EngineConfig` of three frozen parts, read-only once built.

- `LoadConfig`: which model, on which device, in which dtype, with or without CUDA graphs.
- `CacheConfig`: how the paged KV cache is sized and tiered (blocks, memory budget, warm tier,
  cold tier).
- `SchedulerConfig`: the sequence limits (max_num_seqs, max_model_len, max_prefill_chunk) and
  batching, admission, preemption and prefix caching.

Derive a variant with `dataclasses.replace`; `LLM` resolves what is left open (max_model_len None:
the model's context) into its own `EngineConfig` and never writes into a caller's objects.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch


@dataclass(frozen=True)
class LoadConfig:
    """model: a GGUF file, a local HF folder, or None for the packaged default (Gemma 3 270M).
    device: "cpu", "cuda" (or None: CUDA if available). dtype: float32 / bfloat16 / float16 (None:
    bfloat16 on CUDA, float32 on CPU). cuda_graphs: replay decode steps from CUDA graphs (None: on
    where they can run; engine/runner/cuda_graph.py). weights: "int8" (CPU: weight-only int8
    linears, output layer and embeddings, engine/model/quant.py), "float" (every weight in `dtype`:
    the reference), or None: int8 for the packaged default model on the CPU when `dtype` is None, float otherwise.
    tensor_parallel_size: ranks the model is split over (engine/parallel: one process per rank,
    one GPU each on CUDA, gloo on the CPU). tp_check: compare the ranks' block tables and sequence
    lengths after every step (a mismatch raises TensorParallelError)."""

    model: str | Path | None = None
    device: str | torch.device | None = None
    dtype: str | torch.dtype | None = None
    cuda_graphs: bool | None = None
    weights: str | None = None
    tensor_parallel_size: int = 1
    tp_check: bool = False


@dataclass(frozen=True)
class CacheConfig:
    """How the KV cache is sized.

    memory_budget: bytes (int > 1), or a fraction (0 < float <= 1) of the free device memory (on
    CPU: MemAvailable); None = enough for `SchedulerConfig.max_num_seqs` full contexts, capped at
    25% of free memory but never below one full context while that fits in 50%
    (`engine.kv.paged_cache.default_kv_budget`).
    """

    block_size: int = 16
    memory_budget: int | float | None = None
    # The hot pool's dtype: "float32", "float16" or "bfloat16" (another than the model's on the CPU
    # only); None: float16 on the CPU where the C kernels read and write 16-bit pages
    # (longdoc_kernels.cpu.kv_f16(): F16C or AVX-512) under a float32 model, else the model's
    # dtype. Half pages halve the bytes a long context's decode reads (the attention over 32K keys
    # of Gemma 3 270M 1.4-1.6x faster) at no measured cost in perplexity (BENCHMARKS.md "CPU:
    # 16-bit K/V pages"); every attention reads the values the pages hold (a backend's attention
    # over a chunk's fresh keys gets them rounded as stored). "float32" keeps the float32
    # arithmetic of a reference (the tests that compare with transformers in float32 name it).
    kv_dtype: str | None = None
    # Warm tier (INT8 pages read directly by attention); see PagedKVCache.demote.
    warm_budget: int | None = None  # bytes of INT8 warm pages over all groups; None or 0: no warm tier
    hot_window: int = 1024  # most recent tokens kept at full precision
    sink_tokens: int = 16  # first tokens kept at full precision (attention sinks), rounded up to blocks
    # Sliding-window groups get a warm pool too: their in-window blocks older than `hot_window` go
    # INT8 as well (only matters with hot_window < the window; Gemma 3: 15 of 18 layers, window 512).
    warm_sliding: bool = False
    # Demotion policy: None demotes every block outside the sinks and the hot window after each
    # forward; a share w (0 < w <= 1) demotes a sequence's oldest such blocks only while the
    # group's hot pool is more than w full (full precision while memory lasts; sequences are
    # demoted in the order the engine's loop visits them, not globally oldest first), and under
    # block pressure the scheduler demotes before it preempts (`demote(..., force=True)`).
    demote_watermark: float | None = None
    # Quest-style sparse decode: warm blocks kept per query; None: dense. Measured on Gemma 3 270M it
    # loses most needle retrievals (BENCHMARKS.md, "KV cache quality"): an experiment, not a default.
    sparse_top_k: int | None = None
    # Cold tier (engine.kv.cold, used by engine.kv.prefix_cache): prefixes at chunk boundaries.
    host_cache_bytes: int = 0  # host memory for cold blocks (pinned on CUDA); 0: none
    disk_cache_dir: str | None = None  # on-disk block store (survives restarts); None: none
    disk_cache_bytes: int = 8 * 2**30  # the disk store never grows past this


DEFAULT_PREFILL_CHUNK = 1024  # the prefill chunk off CUDA (a CPU step already takes seconds)
DEFAULT_SPECULATIVE_TOKENS = 3  # prompt-lookup drafts per step off CUDA (BENCHMARKS.md, "CPU decode: prompt lookup")


@dataclass(frozen=True)
class SchedulerConfig:
    """max_num_seqs: sequences running at once. max_model_len: the longest sequence (prompt and
    output); None: the model's max_position_embeddings. max_prefill_chunk: prompt tokens computed
    per chunk; chunks are cut on a global grid of this size (engine/core/scheduler.py). None: on
    CUDA, chosen by `LLM` from the model and the free memory (`auto_prefill_chunk`: a power of two
    up to 32,768, so a lone long prompt prefills in a few large chunks while one chunk's step stays
    within about half a second on an H200); elsewhere `DEFAULT_PREFILL_CHUNK`.
    max_num_batched_tokens: tokens per forward. None: on CUDA, max(max_prefill_chunk,
    `gpu_step_tokens`) + max_num_seqs, so several sequences' chunks share a step (Gemma 3 270M,
    16 prompts of 32K in 2K chunks on the H200: the last first token after 1.78 s instead of
    4.83 s with one chunk a step, BENCHMARKS.md "KV tiers on the H200"); elsewhere one prefill
    chunk + max_num_seqs decodes (a CPU step already takes seconds, and a longer one would stall
    the running sequences' next tokens).
    num_speculative_tokens: draft tokens a greedy decoding sequence may have verified per step
    (prompt lookup: engine/core/speculative.py); 0: off; None: `DEFAULT_SPECULATIVE_TOKENS` on the
    CPU, where a decode step is bound by reading the weights and a few more rows cost little, off on
    CUDA (its decode steps replay CUDA graphs of one row per sequence).
    adaptive_speculation: each decode-only step verifies as many drafts (0 to num_speculative_tokens)
    as pay for themselves by this engine's measured step costs and acceptance (DraftGovernor in
    engine/core/speculative.py); False: always up to num_speculative_tokens, so the same steps
    verify on every run (which steps verify never changes a token where verification is exact, the
    CPU's int8 path; with float weights tokens match plain decoding's up to rounding).
    watermark: admit while projected KV use stays under this share of each block pool.
    preemption: "swap" (to host memory, up to swap_budget bytes) or "recompute".
    prefix_caching: reuse the KV of identical prefixes across requests."""

    max_num_seqs: int = 4
    max_model_len: int | None = None
    max_prefill_chunk: int | None = None
    max_num_batched_tokens: int | None = None
    gpu_step_tokens: int = 16384
    num_speculative_tokens: int | None = None
    adaptive_speculation: bool = True
    watermark: float = 0.85
    preemption: str = "swap"
    swap_budget: int = 4 * 2**30
    prefix_caching: bool = True

    def speculative_tokens(self, device_type: str) -> int:
        """`num_speculative_tokens`, or its default on a device of this type where it was left open."""
        if self.num_speculative_tokens is not None:
            return self.num_speculative_tokens
        return 0 if device_type == "cuda" else DEFAULT_SPECULATIVE_TOKENS

    @property
    def prefill_chunk(self) -> int:
        """`max_prefill_chunk`, or `DEFAULT_PREFILL_CHUNK` where it was left open and nothing resolved it."""
        return self.max_prefill_chunk or DEFAULT_PREFILL_CHUNK


@dataclass(frozen=True)
class EngineConfig:
    """Everything an `LLM` is built from (see the module docstring)."""

    load: LoadConfig = field(default_factory=LoadConfig)
    cache: CacheConfig = field(default_factory=CacheConfig)
    scheduler: SchedulerConfig = field(default_factory=SchedulerConfig)
