"""Dispatch between the Triton kernels and their torch references.

Triton runs on CUDA tensors (or anywhere under TRITON_INTERPRET=1, which the CPU tests use); the
reference runs everywhere else, and wherever Triton is not installed. Callers import from here,
never from a kernel module directly, so a CPU machine without Triton still works.
"""

from __future__ import annotations

import functools
import importlib.util
import os
from collections.abc import Iterator
from contextlib import contextmanager

import torch

from longdoc_kernels import reference


@functools.cache
def triton_installed() -> bool:
    return importlib.util.find_spec("triton") is not None


def use_triton(device: torch.device) -> bool:
    if not triton_installed():
        return False
    if os.environ.get("LONGDOC_DISABLE_TRITON") == "1":
        return False
    return device.type == "cuda" or os.environ.get("TRITON_INTERPRET") == "1"


def fused_path(x: torch.Tensor) -> bool:
    """Whether the engine's layers take the fused kernels (residual + norm, act * up, RoPE + KV
    write) for activations x: on CUDA with Triton. A function of its own so that a CPU test can
    switch it on under the interpreter."""
    return x.is_cuda and x.shape[-1] <= 16384 and use_triton(x.device)


def paged_prefill(q, k_cache, v_cache, block_table, **kw):
    if use_triton(q.device):
        from longdoc_kernels.paged_attention import paged_prefill as fn
    else:
        fn = reference.paged_prefill
    return fn(q, k_cache, v_cache, block_table, **kw)


def paged_prefill_varlen(q, k_cache, v_cache, tables, items, **kw):
    if use_triton(q.device):
        from longdoc_kernels.paged_attention import paged_prefill_varlen as fn
    else:
        kw.pop("n_splits", None)
        fn = reference.paged_prefill_varlen
    return fn(q, k_cache, v_cache, tables, items, **kw)


_STATIC_MAX_KV_LEN: list[int] = []


@contextmanager
def static_max_kv_len(n: int) -> Iterator[None]:
    """Inside this block, Triton decode calls that are not given `max_kv_len` use `n` (an upper
    bound of every kv_len of the calls): the kernel then sizes its context splits without reading
    kv_lens back to the host, so the call can be captured in a CUDA graph (engine/runner/cuda_graph.py)
    whatever backend code sits between the graph runner and this dispatch."""
    _STATIC_MAX_KV_LEN.append(int(n))
    try:
        yield
    finally:
        _STATIC_MAX_KV_LEN.pop()


def paged_decode(q, k_cache, v_cache, block_tables, kv_lens, **kw):
    if use_triton(q.device):
        from longdoc_kernels.paged_attention import paged_decode as fn

        if kw.get("max_kv_len") is None and _STATIC_MAX_KV_LEN:
            kw["max_kv_len"] = _STATIC_MAX_KV_LEN[-1]
    else:
        kw.pop("num_splits", None)
        kw.pop("max_kv_len", None)
        fn = reference.paged_decode
    return fn(q, k_cache, v_cache, block_tables, kv_lens, **kw)


def quantize_blocks(x):
    if use_triton(x.device):
        from longdoc_kernels.kv_quant import quantize_blocks as fn
    else:
        fn = reference.quantize_blocks
    return fn(x)


def dequantize_blocks(q, scale, dtype=torch.float32):
    if use_triton(q.device):
        from longdoc_kernels.kv_quant import dequantize_blocks as fn
    else:
        fn = reference.dequantize_blocks
    return fn(q, scale, dtype)


def gather_blocks_tiered(k_cache, v_cache, blocks, kq, vq, ks, vs):
    if use_triton(blocks.device):
        from longdoc_kernels.kv_quant import gather_blocks_tiered as fn
    else:
        fn = reference.gather_blocks_tiered
    return fn(k_cache, v_cache, blocks, kq, vq, ks, vs)


def rms_norm(x, weight, eps, gemma):
    if use_triton(x.device):
        from longdoc_kernels.rmsnorm import rms_norm as fn
    else:
        fn = reference.rms_norm
    return fn(x, weight, eps, gemma)


def add_rms_norm(x, h, w_post, w_next, eps, gemma):
    if use_triton(x.device):
        from longdoc_kernels.fused import add_rms_norm as fn
    else:
        fn = reference.add_rms_norm
    return fn(x, h, w_post, w_next, eps, gemma)


def act_mul(gu, gelu):
    if use_triton(gu.device):
        from longdoc_kernels.fused import act_mul as fn
    else:
        fn = reference.act_mul
    return fn(gu, gelu)


def rope_and_cache_write(q, k, v, cos, sin, k_cache, v_cache, slots, return_k=False):
    if use_triton(q.device):
        from longdoc_kernels.rope_kv import rope_and_cache_write as fn
    else:
        fn = reference.rope_and_cache_write
    return fn(q, k, v, cos, sin, k_cache, v_cache, slots, return_k=return_k)
