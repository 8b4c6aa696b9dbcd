"""The Triton attention backend: the engine's `AttentionBackend` over the kernels in kernels/.

On CUDA tensors it runs `kernels.paged_attention` (flash-style prefill that skips the tiles a
sliding window cannot see; split-context decode); anywhere else (CPU, no Triton) it hands the
call to the torch reference backend, so a model built with it runs everywhere. Both return the
per-row log-sum-exp when asked, so attribution works the same on either path.
"""

from __future__ import annotations

import torch

from engine.attention import AttentionBackend, AttentionOutput, TorchAttentionBackend
from kernels import dispatch


class TritonAttentionBackend(AttentionBackend):
    name = "triton"

    def __init__(self) -> None:
        self.fallback = TorchAttentionBackend()

    def prefill(self, q, k_cache, v_cache, block_table, *, q_offset, kv_len, scale, window=None, softcap=None, return_lse=False):
        if not dispatch.use_triton(q.device):
            return self.fallback.prefill(q, k_cache, v_cache, block_table, q_offset=q_offset, kv_len=kv_len, scale=scale,
                                         window=window, softcap=softcap, return_lse=return_lse)
        out, lse = dispatch.paged_prefill(q, k_cache, v_cache, block_table, q_offset=q_offset, kv_len=kv_len, scale=scale,
                                          window=window, softcap=softcap)
        return AttentionOutput(out, lse if return_lse else None)

    def decode(self, q, k_cache, v_cache, block_tables, kv_lens, *, scale, window=None, softcap=None, return_lse=False):
        if not dispatch.use_triton(q.device):
            return self.fallback.decode(q, k_cache, v_cache, block_tables, kv_lens, scale=scale, window=window,
                                        softcap=softcap, return_lse=return_lse)
        out, lse = dispatch.paged_decode(q, k_cache, v_cache, block_tables, kv_lens, scale=scale, window=window, softcap=softcap)
        return AttentionOutput(out, lse if return_lse else None)


def default_backend(device: torch.device) -> AttentionBackend:
    """Triton on CUDA when it is installed, the torch reference elsewhere."""
    if device.type == "cuda" and dispatch.triton_installed():
        return TritonAttentionBackend()
    return TorchAttentionBackend()
