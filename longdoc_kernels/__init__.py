"""Triton kernels, each beside its torch reference, and the dispatch between them.

Paged KV layout shared with the engine: a pool of blocks `[num_blocks, block_size, kv_heads,
head_dim]` per layer for K and for V; a block table per sequence maps logical block j to a
physical block. Entries: `>= 0` a full-precision block of the hot pool, `-1` no block (freed by a
sliding window, or padding), `<= -2` an INT8 block of the warm pool at index `-entry - 2`, whose
values are `int8 * scale[block, kv_head]`. One kernel reads both kinds.

Modules:
- `reference`: the torch reference of every kernel (float32 math, materialised scores).
- `paged_attention`: flash-style prefill over paged K/V (causal, sliding window that skips the
  tiles it cannot see, GQA, query offset for chunked prefill, log-sum-exp out) and split-context
  decode (flash-decoding) over hot and INT8 warm blocks.
- `kv_quant`: INT8 block-wise quantisation of KV blocks and its inverse.
- `rope_kv`: RoPE applied to q and k fused with the KV-cache write.
- `rmsnorm`: RMSNorm (Llama and Gemma conventions) in one kernel, for the launch-bound decode step.
- `dispatch`: picks Triton on CUDA (or under TRITON_INTERPRET=1) and the reference elsewhere.
"""
