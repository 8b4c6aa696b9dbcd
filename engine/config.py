"""The engine's configuration.

`CacheConfig`: how the paged KV cache is sized and tiered.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
@dataclass
class CacheConfig:
    """How the KV cache is sized.

    memory_budget: bytes (int > 1), or a fraction (0 < float <= 1) of the free device memory (on
    CPU: MemAvailable); None = enough for `max_num_seqs` full contexts, capped at 25% of free memory.
    """

    block_size: int = 16
    memory_budget: int | float | None = None
    max_num_seqs: int = 4
    max_model_len: int | None = None  # None: the model's max_position_embeddings
    max_prefill_chunk: int = 1024
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
    # Cold tier (engine.block_store, used by engine.kv.prefix_cache): prefixes at chunk boundaries.
    host_cache_bytes: int = 0  # host memory for cold blocks (pinned on CUDA); 0: none
    disk_cache_dir: str | None = None  # on-disk block store (survives restarts); None: none
    disk_cache_bytes: int = 8 * 2**30  # the disk store never grows past this
